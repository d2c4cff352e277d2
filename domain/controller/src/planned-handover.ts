import type { Evidence, Handover } from '@robustrl/contracts';
import { batchOfStep, ControllerData, ControllerDraft, ControllerState, HandoverState, Recovery, unknownMachine } from './controller.state';
import { decision, replaceMachine } from './recovery-commands';

export type { HandoverState } from './controller.state';

/**
 * A trainer machine that announced its departure moves at the checkpoint of the step in progress
 * (docs/planned-failures.md "A trainer moves at its checkpoint"): the trainer group is restarted without
 * it once that step's checkpoint is saved, at the step after it, so no step is retried. A warm standby
 * is promoted meanwhile; the machine is isolated (or replaced) only when the group moves. If the
 * checkpoint does not come by the handover deadline, or the machine is lost first, the group moves as
 * after an unplanned loss: the step in progress is retried from the last checkpoint.
 */

/** Less than this before the deadline is too short to wait for a checkpoint. */
export const MIN_HANDOVER_WAIT_MS = 1_000;

/**
 * How long before the machine's deadline the group must have moved: the agent stops its roles a tenth
 * of its grace before SIGKILL, at most 10 s (services/agent/src/notices/termination-notice.ts), so a
 * checkpoint later than that never comes. A tenth of the time left, between 1 s and 10 s.
 */
export function handoverMarginMs(timeLeftMs: number): number {
  return Math.min(10_000, Math.max(1_000, Math.round(timeLeftMs / 10)));
}

/** Whether to wait for a checkpoint, and for which, or why not (named in the decision). */
export type HandoverPlan = { wait: HandoverState } | { moveNow: string };

/**
 * The plan for a trainer machine leaving at `departsAt` (ms; NaN when the notice has none), decided at
 * `now`. The step in progress is the latest one begun; when it has ended and its checkpoint is saved,
 * there is nothing to wait for. A step whose usual length (the last step's, plus its checkpoint's
 * blocking time) would end it after the deadline is not waited for: the wait would only delay the move.
 */
export function planHandover(state: ControllerData, departsAt: number, now: number): HandoverPlan {
  if (Number.isNaN(departsAt)) return { moveNow: 'the notice gives no deadline to wait against' };
  const inProgress = state.stepBatch?.step === state.step ? state.step : state.step - 1;
  if (inProgress < 0 || (state.lastCheckpointStep ?? -1) >= inProgress) return { moveNow: 'no step is in progress since the last checkpoint' };
  const by = departsAt - handoverMarginMs(departsAt - now);
  if (by - now < MIN_HANDOVER_WAIT_MS) return { moveNow: `${Math.max(0, Math.round((departsAt - now) / 1000))} s left is too short to wait for a checkpoint` };
  const expectedEnd = expectedCheckpointAt(state, inProgress, now);
  if (expectedEnd !== null && expectedEnd > by)
    return { moveNow: `step ${inProgress} would be saved about ${Math.round((expectedEnd - by) / 1000)} s after the handover deadline` };
  return { wait: { checkpointStep: inProgress, by, status: 'waiting' } };
}

/** When the step in progress is expected to be saved: its start plus the last step's length and checkpoint time; null when unknown. */
function expectedCheckpointAt(state: ControllerData, step: number, now: number): number | null {
  if (state.stepStartedAt === undefined || state.stepBatch?.step !== step || state.lastStepMs === undefined) return null;
  // A step already longer than the last one is expected to end any moment.
  return Math.max(now, state.stepStartedAt + state.lastStepMs) + (state.lastCheckpointBlockingMs ?? 0);
}

/** The handover as the decision records it. */
export function handoverRecord(h: HandoverState): Handover {
  return { checkpointStep: h.checkpointStep, by: new Date(h.by).toISOString(), status: h.status };
}

/** The handover a decision records, as the controller keeps it. */
export function handoverOf(h: Handover): HandoverState {
  return { checkpointStep: h.checkpointStep, by: Date.parse(h.by), status: h.status };
}

/** The evidence of a decision to wait, or to move at once, naming why. */
export function handoverEvidence(evidence: Evidence, plan: HandoverPlan): Evidence {
  const why = 'wait' in plan ? `moved at the checkpoint of step ${plan.wait.checkpointStep}` : `moved now: ${plan.moveNow}`;
  return { ...evidence, detail: `${evidence.detail ?? 'planned departure'}; ${why}` };
}

/** The recovery as its group restart sees it once the handover ended: after a saved checkpoint, the next step on its own batch. */
export function afterHandover(state: ControllerData, r: Recovery, h: HandoverState): Recovery {
  if (h.status !== 'saved') return { ...r, handover: h };
  const step = h.checkpointStep + 1;
  return { ...r, handover: h, step, checkpointStep: h.checkpointStep, batchId: batchOfStep(state, step) };
}

/** Whether a recovery's group move waits for its handover's checkpoint. */
export const awaitingCheckpoint = (r: Recovery): boolean => r.handover?.status === 'waiting';

/** How decide restarts a trainer group (controller.decide.ts restartGroupOf): given here, so this file needs no decide. */
export type Regroup<S extends ControllerData = ControllerState> = (state: S, r: Recovery, seq: number, now: number) => ControllerDraft[];

/** The checkpoint a departing trainer's group waits for is saved: the group moves to the step after it. */
export function checkpointForHandover(state: ControllerState, step: number, now: number, regroup: Regroup): ControllerDraft[] {
  for (const id of state.index.open) {
    const r = state.recoveries[id];
    if (!awaitingCheckpoint(r) || step < r.handover!.checkpointStep) continue;
    const h: HandoverState = { ...r.handover!, checkpointStep: step, status: 'saved' };
    return handoverEnded(state, r, h, `the checkpoint of step ${step} is saved: the trainer group moves to step ${step + 1}, no step retried`, now, regroup);
  }
  return [];
}

/** A handover whose deadline came without the checkpoint: the group moves now, the step in progress retried. */
export function handoverPastDeadline(state: ControllerState, now: number, regroup: Regroup): ControllerDraft[] | null {
  for (const id of state.index.open) {
    const r = state.recoveries[id];
    if (!awaitingCheckpoint(r) || now < r.handover!.by) continue;
    const h = r.handover!;
    const why = `no checkpoint of step ${h.checkpointStep} by the handover deadline (${new Date(h.by).toISOString()}): the group moves now, step ${r.step} is retried`;
    return handoverEnded(state, r, { ...h, status: 'given-up' }, why, now, regroup);
  }
  return null;
}

/** The handover's end recorded (the same recovery, decided again with its outcome), and the group's move. */
export function handoverEnded(state: ControllerState, r: Recovery, h: HandoverState, detail: string, now: number, regroup: Regroup): ControllerDraft[] {
  const moved = afterHandover(state, r, h);
  const decided = decision(state, moved, moved.action, moved.rule, { signal: 'node-draining', detail }, handoverRecord(h));
  return [decided, ...moveFromDepartingMachine(state, moved, now, regroup)];
}

/**
 * The departing machine's place in a group that moves now (its handover ended): with a standby lent,
 * the machine is refilled as a rollout — isolating it — and the group restarts once the standby is
 * promoted; without one, the machine is replaced by a new one, whose arrival restarts the group. It
 * reads the facts only (the full-recompute reference the specs hold the controller to moves with it).
 */
export function moveFromDepartingMachine<S extends ControllerData>(state: S, r: Recovery, now: number, regroup: Regroup<S>): ControllerDraft[] {
  const next = r.commandSeq + 1;
  const faulty = state.machines[r.machineId] ?? unknownMachine(r.machineId, 'trainer');
  const promote = Object.values(r.commands).find((c) => c.type === 'PromoteRolloutToTrainer');
  if (!promote) return [replaceMachine(r.recoveryId, next, faulty, faulty.role)];
  if (promote.status !== 'succeeded') return []; // the promotion's success moves the group
  const refilled = Object.values(r.commands).some((c) => c.type === 'ReplaceMachine' && c.subject === r.machineId);
  return refilled ? regroup(state, r, next, now) : [replaceMachine(r.recoveryId, next, faulty, 'rollout'), ...regroup(state, r, next + 1, now)];
}
