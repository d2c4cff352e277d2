import type { NetnsHosts } from '../hosts/netns-hosts';
import type { PartitionSpan } from './cluster-invariants';

/** The ways a machine can be cut off (partition-faults.ts injects them). */
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
