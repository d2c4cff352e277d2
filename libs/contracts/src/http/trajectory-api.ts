import { z } from 'zod';
import { TrajectoryStatus, TurnKind } from '../events/trajectories';

/**
 * The trajectory store's HTTP contract (request manager ⇄ router and trainers): what callers hand the
 * store, validated once at the edge (HTTP body, TurnWriter.append) — one malformed turn must be refused
 * on its own, never fail the batched statement its neighbours share.
 */
const Id = z.string().min(1).max(500);
const Count = z.int().nonnegative();

/**
 * How a trajectory continues after its rollout stopped: `keep` its generated turns, or restart from the
 * prompt (the staleness policy decides which).
 */
export const ContinuationPolicy = z.enum(['keep', 'restart-from-prompt']);
export type ContinuationPolicy = z.infer<typeof ContinuationPolicy>;

/** JSON content: anything JSON.stringify keeps (undefined would vanish and violate NOT NULL). */
const JsonValue = z.custom<unknown>((v) => v !== undefined, { message: 'required (any JSON value)' });

export const NewTrajectory = z.object({
  trajectoryId: Id,
  jobId: Id,
  batchId: Id,
  step: Count,
  promptId: Id,
  sampleIndex: Count,
  /** The prompt as the rollout received it: what a restart from the prompt starts from. */
  prompt: JsonValue,
  ownerRolloutId: Id.nullable().optional(),
});
export type NewTrajectory = z.infer<typeof NewTrajectory>;

export const TurnInput = z.object({
  trajectoryId: Id,
  /** Idempotency key: an append redelivered with the same turn id is stored once. */
  turnId: Id,
  turnIndex: Count,
  kind: TurnKind,
  content: JsonValue,
  rolloutId: Id.nullable(),
  weightVersion: Count,
  tokens: Count,
  /**
   * Optional fence: the trajectory attempt this turn continues (from `prefix`). A turn written for an
   * attempt that was since restarted from the prompt is refused instead of landing in the new attempt.
   */
  attempt: Count.optional(),
});
export type TurnInput = z.infer<typeof TurnInput>;

export const Continuation = z.object({
  /** Weight version the continuing rollout generates with. */
  weightVersion: Count,
  policy: ContinuationPolicy,
  /** With `keep`: restart anyway when the kept prefix alone would exceed this bound. */
  maxStaleness: Count.optional(),
});
export type Continuation = z.infer<typeof Continuation>;

export const StatusChange = z.object({
  status: TrajectoryStatus,
  /** New owner, e.g. the living rollout a reassigned trajectory continues on. */
  rolloutId: Id.nullable().optional(),
  /** For `reassigned` (or back to `in-flight`): keep the generated turns or restart from the prompt. */
  continuation: Continuation.optional(),
});
export type StatusChange = z.infer<typeof StatusChange>;
