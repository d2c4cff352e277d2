import { DeadlineIndex } from './deadline-index';
import { RankedValues } from './ranked-values';
import { rulesFor, suspicionKey, type DetectorConfig, type DetectorState } from './detector.state';
import { isGeneratingRollout, PeerView } from './rules';
import { rejoinDeadline } from './rules/not-back-after-restart';

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

/**
 * Brings the index up to date with one machine after a change to it at `at` (the event's time): its rank
 * among generating rollouts, and when it is next due:
 *  - not watching: never (a verdict stands, or it left);
 *  - a rule with no open suspicion: when its `dueAt` says;
 *  - a rule with an open suspicion: nothing new to find while its evidence holds (the probe's timeout
 *    is the deadline); if the evidence is gone (`dueAt` null or after `at`), due at once, to clear it;
 *  - a rule without `dueAt`: every tick.
 */
export function reindexMachine(config: DetectorConfig, state: DetectorState, machineId: string, at: number): void {
  const index = state.index;
  const m = state.machines[machineId];
  if (!m) return;
  index.noteMachine(machineId);
  index.throughputs.set(machineId, isGeneratingRollout(m) ? m.lastThroughput!.tokensPerSecond : null);
  if (m.status !== 'watching') {
    // A machine of a restarted task is due once more: when its time to register again runs out.
    index.deadlines.schedule(machineId, rejoinDeadline(m, state.settings));
    return;
  }
  let due = Infinity;
  let everyTick = false;
  const ruleStates = state.ruleStates[machineId] ?? {};
  const ctx = { machine: m, settings: state.settings };
  for (const rule of rulesFor(config, m)) {
    const open = state.suspicions[suspicionKey(machineId, rule.name)];
    if (open?.probe) due = Math.min(due, open.probe.sentAt + open.probe.timeoutMs);
    if (!rule.dueAt) {
      everyTick = true;
      continue;
    }
    const ruleDue = rule.dueAt(ruleStates[rule.name], ctx);
    if (open) {
      if (ruleDue === null || ruleDue > at) due = Math.min(due, at);
    } else if (ruleDue !== null) due = Math.min(due, ruleDue);
  }
  index.deadlines.schedule(machineId, due === Infinity ? null : due, everyTick);
}

/** Every machine again, after a job-wide change (settings, a blind interval discounted): O(N), rare. */
export function reindexAll(config: DetectorConfig, state: DetectorState, at: number): void {
  for (const machineId of Object.keys(state.machines)) reindexMachine(config, state, machineId, at);
}

/** The index of a state read back from a snapshot: built again from the machines, in their order. */
export function rebuildIndex(config: DetectorConfig, state: DetectorState): DetectorState {
  state.index = new DetectorIndex();
  reindexAll(config, state, state.foldedUntil);
  return state;
}
