import { openRecoveries } from './campaign-view';
import { CONTROL_PLANE_SERVICES, ScheduledFault, pickOf } from './fault-schedule';
import { clusterFault, CLUSTER_FAULTS } from './cluster-faults';
import { PARTITION_FAULTS, partitionFault } from './partition-faults';
import { killEngineDuringLoad, killTrainerAtCheckpoint } from './timed-faults';
import { DEGRADED_FAULTS, degradedFault } from './degraded-faults';
import { isPlanned, plannedFault } from './planned-faults';
import { FaultHost, Injection, killRoleProcess, machinesWithRoleProcess, runningMachines, servingEngines } from './fault-host';

export { FaultHost, Injection, killRoleProcess, machinesWithRoleProcess, runningMachines, servingEngines } from './fault-host';

/**
 * How the whole-system campaign injects each kind of fault (fault-schedule.ts) into the processes it
 * runs (system-chaos.ts). One fault at a time: the kinds of one machine or service here, the kinds
 * that hit several machines or land inside a recovery in cluster-faults.ts.
 */

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
