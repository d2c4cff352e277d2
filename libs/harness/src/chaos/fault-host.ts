import { descendantsOf, signalAll } from '@robustrl/agent';
import type { RobustrlMessage } from '@robustrl/contracts';
import type { LocalProcessSupervisor } from '@robustrl/orchestrator';
import { phasesOf, rolesOf } from './campaign-view';
import type { ControlPlaneService } from './fault-schedule';
import type { LatencyProxy } from './latency-proxy';
import type { Partitions } from './partitions';
import type { PrivateInfra, ServiceProcess } from './private-infra';

/** What the degraded faults need beyond the common host: the relay in front of PostgreSQL, each agent's clock file. */
export interface DegradedHost {
  readonly postgresProxy: LatencyProxy | null;
  /** The file whose number (ms) the machine's agent adds to its clock (skewed-clock.ts). */
  clockFile(machineId: string): string;
  /** Whether the agents run with the clock preload (skewedClockPreload found it). */
  readonly clocksSkewable: boolean;
}

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
