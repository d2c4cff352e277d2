import { z } from 'zod';
import { event } from '../define-message';
import { Topics } from '../topics';
import { Step } from './common';

/** What one turn of a trajectory is: model output and tool calls are policy samples, tool results are not. */
export const TurnKind = z.enum(['model-output', 'tool-call', 'tool-result']);
export type TurnKind = z.infer<typeof TurnKind>;

/** A trajectory's lifecycle, the same on the bus and in the trajectory store. */
export const TrajectoryStatus = z.enum(['in-flight', 'completed', 'reassigned', 'aborted']);
export type TrajectoryStatus = z.infer<typeof TrajectoryStatus>;

/**
 * How a trajectory continues after a weight update (on the same or another rollout): `keep` its generated
 * turns, or restart from the prompt (the request manager's staleness-policy.ts decides which).
 */
export const ContinuationPolicy = z.enum(['keep', 'restart-from-prompt']);
export type ContinuationPolicy = z.infer<typeof ContinuationPolicy>;

/** Why a trajectory restarted from its prompt: the job's policy says so, or its kept prefix alone is beyond the staleness bound. */
export const RestartFromPromptReason = z.enum(['policy-restart', 'prefix-beyond-bound']);
export type RestartFromPromptReason = z.infer<typeof RestartFromPromptReason>;

const TrajectoryRef = {
  trajectoryId: z.string().min(1),
  batchId: z.string().min(1),
  step: Step,
  promptId: z.string().min(1),
  sampleIndex: z.int().nonnegative(),
};

export const TrajectoryTurnAppended = event(
  'TrajectoryTurnAppended',
  Topics.trajectories,
  'One tool iteration of a trajectory was stored (paper §5.2.2: preserve the trajectories).',
  z.object({
    ...TrajectoryRef,
    /** Idempotency key of the turn: a redelivered append stores once. */
    turnId: z.string().min(1),
    turnIndex: z.int().nonnegative(),
    kind: TurnKind,
    rolloutId: z.string().min(1).nullable(),
    weightVersion: z.int().nonnegative(),
    tokens: z.int().nonnegative(),
  }),
);

export const TrajectoryTurnsAppended = event(
  'TrajectoryTurnsAppended',
  Topics.trajectories,
  'Turns stored together, each as TrajectoryTurnAppended would say it, one record for many: the router\'s store announces so the turns that change a trajectory\'s rollout (docs/router.md "Recording"), at thousands a second.',
  z.object({ turns: z.array(TrajectoryTurnAppended.schema.shape.data).min(1).max(1_000) }),
);

export const TrajectoryStatusChanged = event(
  'TrajectoryStatusChanged',
  Topics.trajectories,
  'A trajectory changed status.',
  z.object({ ...TrajectoryRef, status: TrajectoryStatus }),
);

export const TrajectoriesReassigned = event(
  'TrajectoriesReassigned',
  Topics.trajectories,
  "A dead or lent rollout's in-flight trajectories continue on living rollouts from their last stored turn.",
  z.object({
    fromRolloutId: z.string().min(1),
    reason: z.string().min(1),
    assignments: z.array(z.object({ trajectoryId: z.string().min(1), toRolloutId: z.string().min(1), resumeFromTurn: z.int().nonnegative() })),
  }),
);

export const TrajectoryRestartedFromPrompt = event(
  'TrajectoryRestartedFromPrompt',
  Topics.trajectories,
  "A trajectory continuing on newer weights dropped its generated turns and starts again from its prompt (the staleness policy's decision).",
  z.object({
    ...TrajectoryRef,
    /** The attempt that starts now (1 for the first restart); the dropped turns stay stored under the previous one. */
    attempt: z.int().positive(),
    reason: RestartFromPromptReason,
    policy: ContinuationPolicy,
    /** The oldest weight version a dropped generated turn was sampled with. */
    droppedPolicyVersion: z.int().nonnegative(),
    /** The weight version the trajectory continues with. */
    weightVersion: z.int().nonnegative(),
    /** The rollout it continues on, when known. */
    rolloutId: z.string().min(1).nullable(),
  }),
);
