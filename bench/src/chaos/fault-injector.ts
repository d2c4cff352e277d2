import { descendantsOf, signalAll } from '@robustrl/agent';
import type { RobustrlMessage } from '@robustrl/contracts';
import type { LocalProcessSupervisor } from '@robustrl/orchestrator';
import { openRecoveries, phasesOf, rolesOf } from './campaign-view';
import { CONTROL_PLANE_SERVICES, ControlPlaneService, ScheduledFault, pickOf } from './fault-schedule';
import type { PrivateInfra, ServiceProcess } from './private-infra';
import { clusterFault, CLUSTER_FAULTS } from './cluster-faults';
import { PARTITION_FAULTS, partitionFault, Partitions } from './partition-faults';
import { killEngineDuringLoad, killTrainerAtCheckpoint } from './timed-faults';
import { DEGRADED_FAULTS, degradedFault, DegradedHost } from './degraded-faults';
import { isPlanned, plannedFault } from './planned-faults';

/**
 * How the whole-system campaign injects each kind of fault (fault-schedule.ts) into the processes it
 * runs (system-chaos.ts). One fault at a time: the kinds of one machine or service here, the kinds
 * that hit several machines or land inside a recovery in cluster-faults.ts.
 */

/** What the campaign lends its faults: its processes, servers and what it observed. */
export interface FaultHost extends DegradedHost {
  readonly supervisor: LocalProcessSupervisor;
  readonly services: ReadonlyMap<ControlPlaneService, ServiceProcess>;
  readonly infra: PrivateInfra;
  /** The job's state folder (its trainers' ledger and checkpoints). */
  readonly stateDir: string;
  readonly jobId: string;
  events(): readonly RobustrlMessage[];
  /** Calls `watcher` with every line of every machine's log until the returned function is called. */
  watch(watcher: (machineId: string, line: string) => void): () => void;
  until<T>(what: string, condition: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs: number, everyMs?: number): Promise<T>;
  /** The run's partitions (network-namespace hosts only). */
  readonly partitions: Partitions;
}

/** What an injection hit: `none` when it found no target (it does not count as injected). */
export interface Injection {
  target: string;
  note?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function injectFault(host: FaultHost, fault: ScheduledFault): Promise<Injection> {
  const down = fault.downSeconds * 1000;
  switch (fault.kind) {
    case 'kill-trainer-process':
    case 'kill-engine-process': {
      const role = fault.kind === 'kill-trainer-process' ? 'trainer' : 'rollout';
      const target = pickOf(machinesWithRoleProcess(host, role), fault.pick);
      if (!target) return { target: 'none', note: `no ${role} with a running process` };
      killRoleProcess(host, target);
      return { target };
    }
    case 'kill-trainer-machine':
    case 'kill-rollout-machine': {
      const role = fault.kind === 'kill-trainer-machine' ? 'trainer' : 'rollout';
      const target = pickOf(runningMachines(host, role), fault.pick);
      if (!target) return { target: 'none', note: `no running ${role} machine` };
      host.supervisor.killMachine(target, 'SIGKILL');
      return { target };
    }
    case 'kill-service': {
      const name = pickOf(CONTROL_PLANE_SERVICES, fault.pick)!;
      const service = host.services.get(name)!;
      await service.kill9();
      await sleep(down);
      service.start();
      return { target: name, note: `down ${fault.downSeconds} s` };
    }
    case 'kill-controller-mid-recovery':
      return killControllerMidRecovery(host, fault);
    case 'restart-broker':
      host.infra.stopKafka();
      await sleep(down);
      host.infra.startKafka();
      return { target: 'broker', note: `down ${fault.downSeconds} s` };
    case 'restart-postgres':
      host.infra.stopPostgres();
      await sleep(down);
      host.infra.startPostgres();
      return { target: 'postgres', note: `down ${fault.downSeconds} s` };
    case 'kill-engine-during-load': {
      // An engine that serves loads each new version; one still starting may load none for minutes.
      const serving = servingEngines(host);
      return killEngineDuringLoad(pickOf(serving.length ? serving : machinesWithRoleProcess(host, 'rollout'), fault.pick), {
        watch: (watcher) => host.watch(watcher),
        kill: (machineId) => killRoleProcess(host, machineId),
      });
    }
    case 'kill-trainer-during-checkpoint':
      return killTrainerAtCheckpoint(host.stateDir, fault.pick < 0.5 ? 0 : 1);
    default:
      if ((CLUSTER_FAULTS as readonly string[]).includes(fault.kind)) return clusterFault(host, fault);
      if ((PARTITION_FAULTS as readonly string[]).includes(fault.kind)) return partitionFault(host, host.partitions, fault);
      if ((DEGRADED_FAULTS as readonly string[]).includes(fault.kind)) return degradedFault(host, fault);
      if (isPlanned(fault.kind)) return plannedFault(host, { ...fault, kind: fault.kind });
      throw new Error(`no injector for fault kind ${fault.kind}`);
  }
}

/**
 * A machine lost, and the controller killed while the recovery from it is open: a machine loss's
 * recovery (a replacement, or a warm standby) stays open for seconds, where a process restart completes
 * within half a second, too soon to be caught in the middle.
 */
async function killControllerMidRecovery(host: FaultHost, fault: ScheduledFault): Promise<Injection> {
  const before = new Set(openRecoveries(host.events()));
  const role = fault.pick < 0.5 ? 'rollout' : 'trainer';
  const target = pickOf(runningMachines(host, role), fault.pick < 0.5 ? fault.pick * 2 : fault.pick * 2 - 1);
  if (!target) return { target: 'none', note: `no running ${role} machine to lose first` };
  host.supervisor.killMachine(target, 'SIGKILL');
  const recovery = await host.until('a recovery decided', () => openRecoveries(host.events()).find((id) => !before.has(id)), 45_000, 50).catch(() => undefined);
  const controller = host.services.get('controller')!;
  await controller.kill9();
  const stillOpen = recovery !== undefined && openRecoveries(host.events()).includes(recovery);
  await sleep(fault.downSeconds * 1000);
  controller.start();
  // Not inside a recovery, it is not this fault (a plain controller kill): it does not count as injected.
  return {
    target: stillOpen ? 'controller' : 'none',
    note: recovery
      ? `${target} lost first; killed ${stillOpen ? 'while' : 'just after'} ${recovery} ${stillOpen ? 'was open' : 'completed'}, down ${fault.downSeconds} s`
      : `no recovery opened within 45 s of losing ${target}`,
  };
}

/** Kill -9 of the role process tree under the machine's agent; the agent itself stays. */
export function killRoleProcess(host: FaultHost, machineId: string): void {
  const agent = host.supervisor.pidOf(machineId);
  if (agent === undefined) return;
  signalAll(descendantsOf(agent), 'SIGKILL');
}

/** Machines whose current role (by the events) is `role` and whose agent runs; a stable order. */
export function runningMachines(host: FaultHost, role: 'trainer' | 'rollout'): string[] {
  const roles = rolesOf(host.events());
  return host.supervisor
    .machines()
    .filter((m) => m.jobId === host.jobId && m.status === 'running' && roles.get(m.machineId) === role)
    .map((m) => m.machineId)
    .sort();
}

/** Machines of `role` whose agent runs a role process. */
export function machinesWithRoleProcess(host: FaultHost, role: 'trainer' | 'rollout'): string[] {
  return runningMachines(host, role).filter((id) => {
    const pid = host.supervisor.pidOf(id);
    return pid !== undefined && descendantsOf(pid).length > 0;
  });
}

/** Rollout machines with a role process whose engine serves: a working phase reported since it (re)started. */
export function servingEngines(host: FaultHost): string[] {
  const phase = phasesOf(host.events());
  return machinesWithRoleProcess(host, 'rollout').filter((id) => {
    const p = phase.get(id);
    return p !== undefined && p !== null && p !== 'initializing';
  });
}
