import type { ContinuationPolicy, RestartFromPromptReason, TokenSpan, TurnKind } from '@robustrl/contracts';
import { decideContinuation, policyVersionOf } from '@robustrl/request-manager-domain';
import { EnginePool, EngineView } from './engine-pool';
import { Answer } from './request-context';
import { RouterLogger, RouterStats } from './router-reporting';
import { Api, Json } from './stream-splice';
import { TrajectoryIdentity } from './trajectory-identity';
import { PrefixTurn, RecordedTurn, RecordRefusedError, TrajectoryRecorder, TurnConflictError } from './trajectory-recorder';
import { isOutputKind, planTurns, splitChatConversation, splitCompletionPrompt, TurnDraft, turnIdOf, TurnPlan } from './turn-plan';
import { splitTokenPrompt } from './token-prompt';
import { isIdList } from './engines/engine-adapter';
import { evictOldest } from './evict-oldest';

/** What to do with a recorded request, given what the store holds of its trajectory. */
export type RecordingPlan =
  /**
   * The store could not be read or did not take the trajectory's start and inputs: the caller is told to
   * ask again (503). Serving it unrecorded, as main did, lost the trajectory: the trainer then waited for
   * a batch that could never complete (found by the whole-system chaos campaign, a PostgreSQL restart).
   */
  | { kind: 'store-unavailable'; message: string }
  /** The store refused what the caller sent (RecordRefusedError): a 400, not a 503 to retry. */
  | { kind: 'refused'; message: string }
  /** The request contradicts the stored turns: refuse it, so the training data never mixes two histories. */
  | { kind: 'conflict'; message: string }
  /** A retry whose answer is stored: give that back, generate nothing. */
  | { kind: 'replay'; content: unknown }
  /** Generate; the answer becomes turn `outputIndex` of the trajectory's attempt `attempt` (recordAnswer). */
  | { kind: 'generate'; outputIndex: number; attempt: number }
  /** The store restarted the trajectory from its prompt (the continuation policy): the caller must start it again. */
  | { kind: 'restarted'; message: string; reason: RestartFromPromptReason };

/**
 * The job's continuation policy (the request manager's staleness-policy.ts): what happens to a
 * trajectory that goes on with newer weights than its generated turns were sampled with — after a
 * reassignment to another rollout, or a weight update of its own.
 */
export interface ContinuationSettings {
  policy: ContinuationPolicy;
  /** With `keep`: restart anyway when the kept prefix alone is further behind than this (the job's staleness bound). */
  maxStaleness?: number;
}

/**
 * Recording (paper §5.2.2, "preserve the trajectories"): each recorded request's turns go to the
 * trajectory store through the recorder port — the new inputs before generation, the answer before the
 * caller has its end (docs/router.md "Recording"). A store failure is logged, counted and answered as
 * the plan says: ask again (503), a conflict (409) or a refusal (400), never an answer the store lacks.
 */
export class TrajectoryRecording {
  /**
   * Completions: each trajectory's first prompt, so later prompts split into segments unambiguously.
   * Bounded like the sticky map (`maxBases`, the least recently used forgotten): a trajectory whose prompt
   * is forgotten splits against its stored turns, as on a replica that never saw it.
   */
  private readonly completionBases = new Map<string, string>();
  /** The same for token-id prompts. */
  private readonly tokenBases = new Map<string, number[]>();
  private readonly locks = new Map<string, Promise<void>>();

  constructor(
    private readonly recorder: TrajectoryRecorder,
    private readonly pool: EnginePool,
    private readonly stats: RouterStats,
    private readonly log: RouterLogger,
    private readonly continuation: ContinuationSettings = { policy: 'keep' },
    /** Trajectories whose first prompt is kept, for each kind of completions prompt. */
    private readonly maxBases = 100_000,
  ) {}

  /**
   * One request per trajectory at a time: a retry that overlaps the original waits for it and then
   * finds its answer stored, instead of generating a second, different answer for the same turn.
   */
  async exclusive<T>(trajectoryId: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(trajectoryId) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    this.locks.set(trajectoryId, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (this.locks.get(trajectoryId) === tail) this.locks.delete(trajectoryId);
    }
  }

  /**
   * Before generation: compare the request with the stored turns and, when it extends them, store the
   * trajectory's start and the new inputs (tool results) — if everything dies now, they are kept.
   */
  async prepare(api: Api, body: Json, identity: TrajectoryIdentity): Promise<RecordingPlan> {
    const { trajectoryId, jobId, batchId, step, promptId, sampleIndex } = identity;
    // A chat's prompt is the messages before its first answer, whatever is stored: the start and the read
    // go as one call (`open`). A completion's prompt splits against the stored turns: read first.
    const chat = api === 'chat' ? splitChatConversation(body.messages as Parameters<typeof splitChatConversation>[0]) : null;
    let stored;
    try {
      stored = chat
        ? await this.recorder.open({ trajectoryId, jobId, batchId, step, promptId, sampleIndex, prompt: chat.prompt })
        : await this.recorder.prefix(identity.trajectoryId);
    } catch (err) {
      this.failed('prefix', identity, err);
      if (err instanceof RecordRefusedError) return { kind: 'refused', message: err.message };
      if (err instanceof TurnConflictError) return { kind: 'conflict', message: err.message };
      return { kind: 'store-unavailable', message: `the trajectory store could not be read: ${String(err)}` };
    }
    let prompt: unknown;
    let plan: TurnPlan;
    if (chat) {
      prompt = chat.prompt;
      plan = planTurns(chat.turns, stored.turns);
    } else if (isIdList(body.prompt)) {
      const split = splitTokenPrompt(body.prompt, stored.turns, this.tokenBases.get(identity.trajectoryId));
      if ('conflict' in split) plan = { kind: 'conflict', message: split.conflict };
      else {
        prompt = split.base;
        remember(this.tokenBases, identity.trajectoryId, split.base, this.maxBases);
        plan = planTurns(split.turns, stored.turns);
      }
    } else {
      const split = splitCompletionPrompt(body.prompt as string, stored.turns, this.completionBases.get(identity.trajectoryId));
      if ('conflict' in split) plan = { kind: 'conflict', message: split.conflict };
      else {
        prompt = split.base;
        remember(this.completionBases, identity.trajectoryId, split.base, this.maxBases);
        plan = planTurns(split.turns, stored.turns);
      }
    }
    if (plan.kind === 'conflict') return { kind: 'conflict', message: plan.message };
    if (plan.kind === 'replay') return { kind: 'replay', content: plan.turn.content };
    const { append } = plan;
    if (stored.attempt > 0 && append.some((t) => isOutputKind(t.kind))) {
      // Model turns the store does not hold, after a restart: the caller is still on the dropped attempt. Storing them as
      // inputs would bring the dropped samples back under new weights.
      return {
        kind: 'conflict',
        message: `it carries model turns of an attempt that was restarted from its prompt (now attempt ${stored.attempt}): send the prompt alone`,
      };
    }
    // The engine the trajectory is on: the one its next turn most likely comes from.
    const engine = this.pool.pick(identity.trajectoryId);
    if (engine) {
      const restarted = await this.continueOn(identity, stored.turns, engine);
      if (restarted) return restarted;
    }
    // The new inputs are tagged with that engine's version.
    const inputVersion = engine?.weightVersion ?? 0;
    const { attempt } = stored;
    try {
      if (!chat) await this.recorder.start({ trajectoryId, jobId, batchId, step, promptId, sampleIndex, prompt });
      if (append.length > 0) {
        await this.recorder.appendTurns(append.map((t) => turn(identity, attempt, t.turnIndex, t, null, inputVersion, 0)));
      }
    } catch (err) {
      this.failed('append', identity, err);
      if (err instanceof RecordRefusedError) return { kind: 'refused', message: err.message };
      return { kind: 'store-unavailable', message: `the trajectory's start and inputs could not be stored: ${String(err)}` };
    }
    return { kind: 'generate', outputIndex: plan.outputIndex, attempt };
  }

  /**
   * The continuation policy, where the trajectory's generated turns are older than the engine's weights
   * (it was reassigned, or its engine updated): decided here on the stored versions, so the common case
   * costs no call; only a restart goes to the store, which decides again under its lock (it holds the
   * authoritative versions) and drops the turns. A store that cannot be asked is a recording failure:
   * the trajectory goes on (the trainer's fetch still enforces the bound on what it trains on).
   */
  private async continueOn(identity: TrajectoryIdentity, stored: readonly PrefixTurn[], engine: EngineView): Promise<RecordingPlan | null> {
    const { policy, maxStaleness } = this.continuation;
    const bound = maxStaleness === undefined ? undefined : { maxStaleness };
    const policyVersion = policyVersionOf(stored);
    if (decideContinuation(policyVersion, engine.weightVersion, policy, bound).action === 'continue') return null;
    let decision;
    try {
      decision = await this.recorder.continueWith(identity.trajectoryId, {
        rolloutId: engine.id,
        continuation: { weightVersion: engine.weightVersion, policy, maxStaleness },
      });
    } catch (err) {
      this.failed('continuation', identity, err);
      return null;
    }
    if (decision.action === 'continue') return null;
    this.completionBases.delete(identity.trajectoryId);
    const why =
      decision.reason === 'policy-restart'
        ? `the job's continuation policy is ${policy}`
        : `the kept turns alone would be beyond the staleness bound of ${maxStaleness}`;
    this.log.warn('trajectory restarted from its prompt', {
      trajectoryId: identity.trajectoryId,
      reason: decision.reason,
      policyVersion,
      weightVersion: engine.weightVersion,
    });
    return {
      kind: 'restarted',
      reason: decision.reason,
      message:
        `trajectory ${identity.trajectoryId} was restarted from its prompt: its generated turns were sampled with weight version ${policyVersion} ` +
        `and it continues on version ${engine.weightVersion} (engine ${engine.id}); ${why}. Its turns are dropped: send the prompt alone to start it again`,
    };
  }

  /**
   * After generation, before the caller has the whole answer: the answer is the trajectory's turn
   * `outputIndex`. Throws when the store did not take it, so the caller is told to ask again rather
   * than handed a turn the store lacks.
   */
  async recordAnswer(identity: TrajectoryIdentity, api: Api, at: { outputIndex: number; attempt: number }, answer: Answer): Promise<void> {
    const kind = answerKind(api, answer.content);
    const last = answer.engines[answer.engines.length - 1];
    // A turn continued across engines was generated with the oldest of their weights: the conservative bound on its staleness.
    const weightVersion = Math.min(...answer.engines.map((e) => e.weightVersion));
    try {
      await this.recorder.appendTurns([
        turn(identity, at.attempt, at.outputIndex, { kind, content: answer.content }, last.id, weightVersion, answer.tokens, answer.spans),
      ]);
    } catch (err) {
      this.failed('append', identity, err);
      throw err;
    }
  }

  private failed(what: string, identity: TrajectoryIdentity, err: unknown): void {
    this.stats.recordingErrors += 1;
    this.log.error(`recording failed (${what})`, { trajectoryId: identity.trajectoryId, error: String(err) });
  }
}

/** Kept as the most recently used (a Map's order is its insertion order), the oldest forgotten beyond `limit`. */
function remember<V>(map: Map<string, V>, key: string, value: V, limit: number): void {
  map.delete(key);
  map.set(key, value);
  evictOldest(map, limit);
}

/** A chat answer with tool calls is a `tool-call` turn (the trajectory now waits on its tool); any other answer a `model-output`. */
function answerKind(api: Api, content: unknown): TurnKind {
  return api === 'chat' && Array.isArray((content as Json).tool_calls) ? 'tool-call' : 'model-output';
}

/** A turn of attempt `attempt`: the attempt fences it (the store refuses it once the trajectory restarted from its prompt since). */
function turn(
  identity: TrajectoryIdentity,
  attempt: number,
  turnIndex: number,
  draft: TurnDraft,
  rolloutId: string | null,
  weightVersion: number,
  tokens: number,
  spans: TokenSpan[] = [],
): RecordedTurn {
  return {
    trajectoryId: identity.trajectoryId,
    turnId: turnIdOf(identity.trajectoryId, turnIndex, draft.content, attempt),
    turnIndex,
    kind: draft.kind,
    content: draft.content,
    rolloutId,
    weightVersion,
    tokens,
    attempt,
    ...(spans.length > 0 ? { spans } : {}),
  };
}
