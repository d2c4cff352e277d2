import type { Role } from '@robustrl/contracts';
import type { MachineSpec, Orchestrator } from '@robustrl/orchestrator';
import type { FaultHost, Injection } from './fault-host';
import { runningMachines } from './fault-host';
import { PartitionFault, Partitions } from './partitions';
import type { ScheduledFault } from './fault-schedule';
import { pickOf } from './fault-schedule';

/**
 * Network partitions of one machine, on network-namespace hosts (../hosts/netns-hosts.ts): cut from the
 * broker only, from the control plane only (the router and the HTTP APIs; the broker still reachable),
 * from its peers only, or from everything; healed after a drawn time — from well inside the detection
 * window (it must heal with no recovery) to well past it (one recovery, never a second after the heal).
 *
 * What stays simulated: one kernel and one clock; a partial cut is a blackhole route, so the cut host's
 * own sends fail at once instead of timing out (its peers' time out).
 */
export { PARTITION_FAULTS, PartitionFault, Partitions } from './partitions';

/** How long a partition lasts: from a few seconds (inside the detection window) to several windows. */
export const partitionSeconds = (fault: ScheduledFault) => Math.round(fault.downSeconds * 4 * 10) / 10;

export async function partitionFault(host: FaultHost, partitions: Partitions, fault: ScheduledFault): Promise<Injection> {
  if (!partitions.hosts) return { target: 'none', note: 'partitions need network-namespace hosts (--hosts netns)' };
  const role = fault.pick < 0.5 ? 'trainer' : 'rollout';
  const target = pickOf(runningMachines(host, role), fault.pick < 0.5 ? fault.pick * 2 : fault.pick * 2 - 1);
  if (!target) return { target: 'none', note: `no running ${role} machine` };
  const seconds = partitionSeconds(fault);
  await partitions.partition(target, fault.kind as PartitionFault, seconds);
  return { target, note: `cut ${seconds} s, healed` };
}

/**
 * The controller's orchestrator as a cluster's is during a partition: it cannot reach a node cut off
 * from the control plane, so isolating or releasing a machine there takes effect only once the
 * partition heals (a kubelet acting on its pod's deletion when it reconnects). Until then the machine
 * runs on: only its agent's lease can stop its trainer (DESIGN §Recovery, fencing).
 */
export class PartitionedOrchestrator implements Orchestrator {
  readonly kind: Orchestrator['kind'];
  private readonly deferred = new Map<string, Array<() => Promise<unknown>>>();

  constructor(
    private readonly inner: Orchestrator,
    private readonly partitions: Partitions,
    private readonly log: (line: string) => void,
  ) {
    this.kind = inner.kind;
    partitions.onHealed((machineId) => {
      const pending = this.deferred.get(machineId) ?? [];
      this.deferred.delete(machineId);
      for (const run of pending) void run().catch((err: unknown) => this.log(`deferred operation on ${machineId} failed: ${String(err)}`));
    });
  }

  listMachines(jobId: string): Promise<MachineSpec[]> {
    return this.inner.listMachines(jobId);
  }

  isolateMachine(request: { operationId: string; jobId: string; machineId: string; reason: string }): Promise<void> {
    if (!this.partitions.unreachable(request.machineId)) return this.inner.isolateMachine(request);
    this.defer(request.machineId, 'isolation', () => this.inner.isolateMachine(request));
    return Promise.resolve();
  }

  requestMachine(request: { operationId: string; jobId: string; role: Role; zone: string; hardwareClass: string; replaces?: string }): Promise<MachineSpec> {
    return this.inner.requestMachine(request);
  }

  releaseMachine(request: { operationId: string; jobId: string; machineId: string; reason: string }): Promise<string> {
    if (!this.partitions.unreachable(request.machineId)) return this.inner.releaseMachine(request);
    this.defer(request.machineId, 'release', () => this.inner.releaseMachine(request));
    return Promise.resolve(request.machineId);
  }

  restartMachines(request: { operationId: string; jobId: string; machineIds: string[] }): Promise<void> {
    return this.inner.restartMachines(request);
  }

  restartTask(request: { operationId: string; jobId: string }): Promise<void> {
    return this.inner.restartTask(request);
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private defer(machineId: string, what: string, run: () => Promise<unknown>): void {
    this.log(`${machineId} is cut off from the control plane: its ${what} takes effect when the partition heals`);
    this.deferred.set(machineId, [...(this.deferred.get(machineId) ?? []), run]);
  }
}
