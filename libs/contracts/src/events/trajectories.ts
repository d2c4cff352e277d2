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
