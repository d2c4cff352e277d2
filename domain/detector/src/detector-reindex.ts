import { rulesFor, suspicionKey, type DetectorConfig, type DetectorState } from './detector.state';
import { DetectorIndex } from './detector-index';
import { isGeneratingRollout } from './rules';
import { rejoinDeadline } from './rules/not-back-after-restart';

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
