import { DeadlineIndex } from './deadline-index';
import { RankedValues } from './ranked-values';
import type { PeerView } from './rules';

/**
 * What the detector derives from its state to keep per-message work independent of the job's size:
 *  - `deadlines`: when each watched machine is next due (its rules' `dueAt`, its probes' timeouts), so a
 *    tick evaluates the machines due instead of every machine;
 *  - `throughputs`: the generating rollouts ranked by tokens/s, so a peer median is O(log N);
 *  - `order`: the order machines joined, the order a tick evaluates the due ones in (as it evaluated all
 *    of them before: verdict numbers and the trainer-echo mute depend on it).
 *
 * Derived only: it is left out of snapshots and rebuilt from the machines (`rebuildIndex`), and every
 * change to a machine, its rule states or its suspicions goes through `reindexMachine`.
 */
export class DetectorIndex {
  readonly deadlines = new DeadlineIndex();
  readonly throughputs = new RankedValues();
  private readonly order = new Map<string, number>();

  noteMachine(machineId: string): void {
    if (!this.order.has(machineId)) this.order.set(machineId, this.order.size);
  }

  /**
   * `ids` in the order the machines record lists them: integer-like ids first, ascending (as JavaScript
   * orders such object keys), then the others in the order they joined.
   */
  inMachineOrder(ids: string[]): string[] {
    const rank = (id: string): [number, number] => (isIndexKey(id) ? [0, Number(id)] : [1, this.order.get(id) ?? Infinity]);
    return ids
      .map((id) => ({ id, r: rank(id) }))
      .sort((a, b) => a.r[0] - b.r[0] || a.r[1] - b.r[1])
      .map((e) => e.id);
  }

  peersOf(machineId: string): PeerView {
    return {
      generatingRollouts: () => this.throughputs.countWithout(machineId),
      medianTokensPerSecond: () => this.throughputs.medianWithout(machineId),
    };
  }
}

const isIndexKey = (id: string) => /^(0|[1-9]\d{0,8})$/.test(id);
