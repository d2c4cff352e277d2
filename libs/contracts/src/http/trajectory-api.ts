import { z } from 'zod';
import { ContinuationPolicy, RestartFromPromptReason, TrajectoryStatus, TurnKind } from '../events/trajectories';

/**
 * The trajectory store's HTTP contract (request manager ⇄ router and trainers), described once for both
 * sides. What callers hand the store is validated at the edge (HTTP body, TurnWriter.append) — one
 * malformed turn must be refused on its own, never fail the batched statement its neighbours share.
 * What the store answers is typed by the response schemas below (the controller's return types) and
 * parsed by the readers that act on it (the router reads prefixes).
 */
/** The longest id the store keeps (trajectory, turn, job, batch, prompt, rollout ids). */
export const MAX_ID_LENGTH = 500;
/** A TEXT column's value: PostgreSQL's TEXT cannot hold NUL (the statement fails, and a batch's neighbours with it). */
const Id = z
  .string()
  .min(1)
  .max(MAX_ID_LENGTH)
  .refine((s) => !s.includes('\u0000'), { message: 'must not contain the NUL character' });
/** The largest value of an INTEGER column (PostgreSQL's is 32-bit signed). */
export const MAX_STORED_INT = 2_147_483_647;
/** A count, index or version as its INTEGER column holds it. */
const Count = z.int().nonnegative().max(MAX_STORED_INT);

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

/**
 * How a span's context reached its engine: `prompt` — the request as the caller sent it (the first span);
 * `tokens` — the prompt plus the exact token ids sampled before it (the engine took a token prompt, so the
 * log-probs condition on what was sampled); `text` — the prompt plus the text generated before it, which
 * the engine re-tokenised (the ids it conditioned on may differ from those sampled, and it prefilled them
 * again: `prefillTokens`).
 */
export const SpanContext = z.enum(['prompt', 'tokens', 'text']);
export type SpanContext = z.infer<typeof SpanContext>;

/**
 * One engine's contiguous part of a generated turn (token-level preservation): the token ids it
 * sampled, in order, with their log-probs, and which engine and weight version sampled them. A turn that
 * failed over mid-stream has several; their ids concatenated are the turn's tokens, none lost or repeated.
 */
export const TokenSpan = z
  .object({
    rolloutId: Id,
    weightVersion: Count,
    /** Empty when the engine reports no ids (SGLang's chat stream): the span still names its engine, version and context. */
    tokenIds: z.array(Count).max(1_000_000),
    /** The sampling engine's log-prob of each id (null where it reported none); as long as tokenIds. */
    logprobs: z.array(z.number().nullable()).max(1_000_000),
    /**
     * Tokens the engine says it sampled in the span (its own counter), when it says: more than
     * tokenIds.length when its stream left ids out (llama.cpp's stream does, for tokens that end inside
     * a multi-byte character) — the span's ids are then incomplete, and nothing pretends otherwise.
     */
    sampled: Count.nullable(),
    context: SpanContext,
    /** With context `text`: the tokens the engine prefilled again to continue (its prompt's size, when it says). */
    prefillTokens: Count.optional(),
    /**
     * The ids the engine conditioned the turn on (its tokenisation of the prompt, or the token prompt it
     * was given), on a turn's first span when the engine reports them: with the sampled ids, what a
     * policy-gradient trainer needs without tokenising anything again (docs/integrators/trajectories.md "Tokens in, tokens out").
     */
    promptTokenIds: z.array(Count).max(1_000_000).optional(),
  })
  .refine((s) => s.logprobs.length === s.tokenIds.length, { message: 'logprobs must have one entry per token id' });
export type TokenSpan = z.infer<typeof TokenSpan>;

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
  /** What each engine sampled, span by span, for a generated turn the router recorded (absent for inputs). */
  spans: z.array(TokenSpan).max(1_000).optional(),
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

/** A JSON object of at most 64 KiB: what a job says about a trajectory (task id, verifier's verdict...). */
const Metadata = z.record(z.string(), JsonValue).refine((m) => JSON.stringify(m).length <= 65_536, { message: 'at most 64 KiB of JSON' });

/** What the environment scored a completed trajectory (its verifier), and what the job keeps with it. */
export const TrajectoryOutcome = z.object({
  reward: z.number().refine(Number.isFinite, { message: 'a finite number' }),
  metadata: Metadata.optional(),
});
export type TrajectoryOutcome = z.infer<typeof TrajectoryOutcome>;

export const StatusChange = z
  .object({
    status: TrajectoryStatus,
    /** New owner, e.g. the living rollout a reassigned trajectory continues on. */
    rolloutId: Id.nullable().optional(),
    /** For `reassigned` (or back to `in-flight`): keep the generated turns or restart from the prompt. */
    continuation: Continuation.optional(),
    /** With `completed`: the trajectory's reward and metadata, stored with it and handed to the trainer. */
    outcome: TrajectoryOutcome.optional(),
  })
  .refine((c) => c.outcome === undefined || c.status === 'completed', { message: 'only a completed trajectory has an outcome', path: ['outcome'] });
export type StatusChange = z.infer<typeof StatusChange>;

// ---- Request bodies as sent: one item alone, or the batch form (`{ trajectories }` / `{ turns }`). ----

/** `POST /v1/trajectories` with many: one call starts a whole batch. */
export const NewTrajectories = z.object({ trajectories: z.array(NewTrajectory).min(1).max(10_000) });
export type NewTrajectories = z.infer<typeof NewTrajectories>;

/** A turn in the body of `POST /v1/trajectories/:id/turns`: the trajectory id is the path's. */
export const TurnBody = TurnInput.omit({ trajectoryId: true });
export type TurnBody = z.infer<typeof TurnBody>;

export const TurnBatch = z.object({ turns: z.array(TurnBody).min(1).max(10_000) });
export type TurnBatch = z.infer<typeof TurnBatch>;

/** `GET /v1/jobs/:jobId/batches/:batchId/completed?…`: query strings, hence the coercion. */
export const CompletedBatchQuery = z.object({
  currentWeightVersion: z.coerce.number().int().nonnegative().max(MAX_STORED_INT),
  maxStaleness: z.coerce.number().int().nonnegative().max(MAX_STORED_INT),
});
export type CompletedBatchQuery = z.infer<typeof CompletedBatchQuery>;

// ---- Responses: what the store answers, read by the router (prefix) and trainers (batches). ----

const Timestamp = z.iso.datetime();

/** `created` now, `existing` (same id, same slot: a retry), `conflict` (another id holds the slot; the call answers 409). */
export const StartOutcome = z.enum(['created', 'existing', 'conflict']);
export type StartOutcome = z.infer<typeof StartOutcome>;

export const StartResult = z.object({ trajectoryId: Id, outcome: StartOutcome });
export type StartResult = z.infer<typeof StartResult>;

/** 200 of `POST /v1/trajectories`, per trajectory in the order given. */
export const StartResponse = z.object({ results: z.array(StartResult) });
export type StartResponse = z.infer<typeof StartResponse>;

/**
 * Per appended turn: `new` (stored now) and `duplicate` (its turn id was already stored) are durable;
 * the rest were refused — `unknown-trajectory`, `closed` (completed or aborted), `stale-attempt` (the
 * trajectory restarted from its prompt since), `index-taken` (another turn id holds that index).
 */
export const AppendOutcome = z.enum(['new', 'duplicate', 'unknown-trajectory', 'closed', 'stale-attempt', 'index-taken']);
export type AppendOutcome = z.infer<typeof AppendOutcome>;

export const AppendResult = z.object({ turnId: Id, outcome: AppendOutcome });
export type AppendResult = z.infer<typeof AppendResult>;

/** 200 of `POST /v1/trajectories/:id/turns` (every turn durable), per turn in the order given. */
export const AppendResponse = z.object({ results: z.array(AppendResult) });
export type AppendResponse = z.infer<typeof AppendResponse>;

/** A trajectory without its turns. `attempt` counts restarts from the prompt. */
export const TrajectorySummary = z.object({
  trajectoryId: Id,
  jobId: Id,
  batchId: Id,
  step: Count,
  promptId: Id,
  sampleIndex: Count,
  prompt: JsonValue,
  ownerRolloutId: Id.nullable(),
  status: TrajectoryStatus,
  attempt: Count,
  /** -1 while the attempt has no turn. */
  lastTurnIndex: z.int().min(-1),
  /** Oldest / newest weight version of a generated (model-output, tool-call) turn of this attempt. */
  minWeightVersion: Count.nullable(),
  maxWeightVersion: Count.nullable(),
  /** Every weight version a turn of this attempt was tagged with, ascending. */
  weightVersions: z.array(Count),
  /** The outcome it completed with (null: none given, or not completed). */
  reward: z.number().nullable(),
  metadata: JsonValue.nullable(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  completedAt: Timestamp.nullable(),
});
export type TrajectorySummary = z.infer<typeof TrajectorySummary>;

/** A turn as stored: what was appended (less the fence), and when. */
export const StoredTurn = TurnInput.pick({
  turnId: true,
  turnIndex: true,
  kind: true,
  content: true,
  rolloutId: true,
  weightVersion: true,
  tokens: true,
}).extend({
  /** Null when the turn was stored without spans (a tool result, an engine that reports no token ids). */
  spans: z.array(TokenSpan).nullable(),
  createdAt: Timestamp,
});
export type StoredTurn = z.infer<typeof StoredTurn>;

/** `GET /v1/trajectories/:id`: the trajectory with the turns of its current attempt, in order. */
export const TrajectoryWithTurns = TrajectorySummary.extend({ turns: z.array(StoredTurn) });
export type TrajectoryWithTurns = z.infer<typeof TrajectoryWithTurns>;

/** `GET /v1/trajectories/:id/prefix`: what a continuation on another rollout starts from (404: not stored). */
export const TrajectoryPrefix = z.object({
  /** The prompt is in here. */
  trajectory: TrajectorySummary,
  /** The turns so far (this attempt), in order. */
  turns: z.array(StoredTurn),
  resumeFromTurn: Count,
});
export type TrajectoryPrefix = z.infer<typeof TrajectoryPrefix>;

/** What the staleness policy decided for a continuation (request manager's staleness-policy.ts). */
export const ContinuationDecision = z.discriminatedUnion('action', [
  z.object({ action: z.literal('continue'), reason: z.enum(['prefix-current', 'policy-keep']) }),
  z.object({ action: z.literal('restart-from-prompt'), reason: RestartFromPromptReason }),
]);
export type ContinuationDecision = z.infer<typeof ContinuationDecision>;

/** 200 of `POST /v1/trajectories/:id/status` (404: not stored; 409: a transition out of a final status). */
export const StatusResult = z.object({
  trajectory: TrajectorySummary,
  previous: TrajectoryStatus,
  /** False when the call repeated the current state (idempotent). */
  changed: z.boolean(),
  continuation: ContinuationDecision.nullable(),
});
export type StatusResult = z.infer<typeof StatusResult>;

/** Trajectories of a batch per status, and in all. The shape is checked against TrajectoryStatus. */
const progressShape = {
  'in-flight': Count,
  completed: Count,
  reassigned: Count,
  aborted: Count,
  total: Count,
} satisfies Record<TrajectoryStatus | 'total', typeof Count>;
export const BatchProgress = z.object(progressShape);
export type BatchProgress = z.infer<typeof BatchProgress>;

/** `GET /v1/jobs/:jobId/batches/:batchId`. */
export const BatchProgressResponse = BatchProgress.extend({ jobId: Id, batchId: Id });
export type BatchProgressResponse = z.infer<typeof BatchProgressResponse>;

/**
 * One trajectory as a policy-gradient trainer takes it (docs/integrators/trajectories.md "Tokens in, tokens out"): the prompt's
 * ids, then every token after it — sampled by the policy (`lossMask` 1, with its log-prob and the weight
 * version that sampled it) or given by the environment between turns (tool results, 0, nulls).
 */
export const TrainingSample = z.object({
  promptTokenIds: z.array(Count),
  responseTokenIds: z.array(Count),
  logprobs: z.array(z.number().nullable()),
  lossMask: z.array(z.union([z.literal(0), z.literal(1)])),
  /** The weight version that sampled each response token (null for the environment's tokens). */
  versions: z.array(Count.nullable()),
  reward: z.number().nullable(),
  metadata: JsonValue.nullable(),
  /**
   * False when a continuation re-tokenised text (context `text`): the ids are still what was sampled,
   * but the log-probs after the failover were conditioned on another tokenisation of the prefix.
   */
  exact: z.boolean(),
});
export type TrainingSample = z.infer<typeof TrainingSample>;

/** A completed trajectory's sample, or why none can be built from what was stored. */
export const BatchSample = z.object({ trajectoryId: Id, sample: TrainingSample.nullable(), reason: z.string().nullable() });
export type BatchSample = z.infer<typeof BatchSample>;

export const CompletedBatch = z.object({
  /** The completed trajectories within the staleness bound, with their turns, by prompt and sample. */
  trajectories: z.array(TrajectoryWithTurns),
  /** The same trajectories (same order) as training samples: prompt and response ids, log-probs, loss mask, reward. */
  samples: z.array(BatchSample),
  /** Completed but beyond the bound (not returned with turns). */
  stale: z.array(z.object({ trajectoryId: Id, staleness: Count })),
});
export type CompletedBatch = z.infer<typeof CompletedBatch>;

/** `GET /v1/jobs/:jobId/batches/:batchId/completed`: for a (restarted) trainer, echoing the query. */
export const CompletedBatchResponse = CompletedBatch.extend({
  jobId: Id,
  batchId: Id,
  currentWeightVersion: Count,
  maxStaleness: Count,
});
export type CompletedBatchResponse = z.infer<typeof CompletedBatchResponse>;
