import type { Role } from '@robustrl/contracts';
import type { MachineSpec, Orchestrator } from '@robustrl/orchestrator';
import type { NetnsHosts } from '../hosts/netns-hosts';
import type { PartitionSpan } from './cluster-invariants';
import type { FaultHost, Injection } from './fault-injector';
import { runningMachines } from './fault-injector';
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
export const PARTITION_FAULTS = ['partition-from-broker', 'partition-from-control-plane', 'partition-from-peers', 'partition-full'] as const;
export type PartitionFault = (typeof PARTITION_FAULTS)[number];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the machines that are cut off right now are cut from; the orchestrator below reads it. */
export class Partitions {
  private readonly cut = new Map<string, PartitionFault>();
  private readonly healed = new Set<(machineId: string) => void>();
  /** Every partition made so far: the campaign's invariants read them (cluster-invariants.ts). */
  readonly spans: PartitionSpan[] = [];

  constructor(readonly hosts: NetnsHosts | null) {}

  /** Whether the orchestrator cannot reach the machine's node: cut from everything, or from the control plane's network. */
  unreachable(machineId: string): boolean {
    const how = this.cut.get(machineId);
    return how === 'partition-full' || how === 'partition-from-control-plane';
  }

  async partition(machineId: string, how: PartitionFault, seconds: number): Promise<void> {
    const hosts = this.hosts!;
    this.cut.set(machineId, how);
    if (how === 'partition-full') hosts.cut(machineId);
    else hosts.cutFrom(machineId, how === 'partition-from-broker' ? 'broker' : how === 'partition-from-control-plane' ? 'control-plane' : 'peers');
    const from = Date.now();
    await sleep(seconds * 1000);
    hosts.heal(machineId);
    this.cut.delete(machineId);
    this.spans.push({ machineId, kind: how, from, to: Date.now() });
    for (const listener of this.healed) listener(machineId);
  }

  onHealed(listener: (machineId: string) => void): void {
    this.healed.add(listener);
  }
}

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
