import type { Continuation, ContinuationDecision, NewTrajectory, StoredTurn, TurnInput } from '@robustrl/contracts';
import { decideContinuation, policyVersionOf } from '@robustrl/request-manager-domain';
import { RobustrlError } from '@robustrl/bus';

/** The one TurnKind is the contracts'; re-exported because the router's public API always named it. */
export type { TurnKind } from '@robustrl/contracts';

/**
 * The port the router records trajectories through (paper §5.2.2, "preserve the trajectories": every
 * tool iteration is stored outside the rollout machine, so a rollout that dies mid-trajectory loses
 * nothing already generated). The request manager's trajectory store implements it (over HTTP, see
 * http-trajectory-recorder.ts); the in-memory recorder below serves tests and the demo. What goes in
 * and out is the store's HTTP contract (libs/contracts http/trajectory-api.ts), so the port and the
 * wire cannot drift apart.
 *
 * Contract (what the router relies on):
 *  - `start` is idempotent: a second call for a known trajectory is a no-op.
 *  - `appendTurns` is idempotent by `turnId`: a turn already stored is skipped, so a retried HTTP
 *    request or a redelivered append stores once.
 *  - Per trajectory, turns arrive in `turnIndex` order without gaps (the router serialises the
 *    requests of one trajectory). A different `turnId` at an index already stored is a conflict.
 *  - `prefix` returns the stored turns of the trajectory's current attempt in `turnIndex` order (what a
 *    resumed trajectory continues from) and the attempt (0 until it is first restarted from its prompt).
 *  - `open` is `start` then `prefix` as one call (one statement where the store allows): a start that
 *    contradicts a stored trajectory (another id in its slot) is a TurnConflictError.
 *  - `continueWith` hands the store the job's continuation policy for a trajectory that goes on with
 *    newer weights; the store decides (staleness-policy.ts `decideContinuation`, on the oldest version
 *    it holds) and, on restart-from-prompt, drops the attempt's turns in the same transaction. Returns
 *    the store's decision; a trajectory the store does not hold is an error.
 *
 * How the router fills a turn: `turnId` is derived from trajectory id, turn index and a hash of the
 * content (turn-plan.ts `turnIdOf`); `content` is the chat message as it appears in the conversation,
 * or the completions text segment; `rolloutId` is the engine that generated it (null for turns the
 * model did not generate); `tokens` is what the model generated (0 for tool results: the router has
 * no tokenizer). The start's `prompt` is, for chat, the messages before the first assistant message;
 * for completions, the prompt string.
 */
export type TrajectoryStart = NewTrajectory;
export type RecordedTurn = TurnInput;
/** What the router reads back of a stored turn. */
/** `spans` when stored: a token prompt is matched against what the engines sampled. */
export type PrefixTurn = Pick<StoredTurn, 'turnIndex' | 'kind' | 'content' | 'weightVersion'> & Partial<Pick<StoredTurn, 'spans'>>;
/** A trajectory's current attempt as stored (attempt 0 and no turns for one not stored yet). */
export interface StoredPrefix {
  attempt: number;
  turns: PrefixTurn[];
}
/** The rollout a trajectory goes on with, and the job's continuation policy for it. */
export interface ContinuationRequest {
  rolloutId: string | null;
  continuation: Continuation;
}

export interface TrajectoryRecorder {
  start(t: TrajectoryStart): Promise<void>;
  appendTurns(turns: RecordedTurn[]): Promise<void>;
  prefix(trajectoryId: string): Promise<StoredPrefix>;
  open(t: TrajectoryStart): Promise<StoredPrefix>;
  continueWith(trajectoryId: string, request: ContinuationRequest): Promise<ContinuationDecision>;
}

/** The store refused the request itself (a 4xx other than 404 and 409): the caller's input, which asking again cannot fix. */
export class RecordRefusedError extends RobustrlError {
  constructor(message: string) {
    super(message);
  }
}

/** A turn that contradicts what is stored: same index, different content (or a gap in the indices). */
export class TurnConflictError extends RobustrlError {
  constructor(message: string) {
    super(message);
  }
}

/**
 * Trajectories in memory. Strict on purpose: it rejects gaps and conflicting turns instead of storing
 * them, so a test of the router fails on the first turn the router gets wrong.
 */
export class InMemoryTrajectoryRecorder implements TrajectoryRecorder {
  private readonly starts = new Map<string, TrajectoryStart>();
  private readonly turnsByTrajectory = new Map<string, RecordedTurn[]>();
  private readonly attempts = new Map<string, number>();
  /** Every continuation asked for, in order: lets a test see what the router asked the store. */
  readonly continuationLog: Array<ContinuationRequest & { trajectoryId: string; decision: ContinuationDecision }> = [];
  /** Every append call's turns, duplicates included: lets a test see what was attempted. */
  readonly appendLog: RecordedTurn[] = [];

  async start(t: TrajectoryStart): Promise<void> {
    if (!this.starts.has(t.trajectoryId)) this.starts.set(t.trajectoryId, structuredClone(t));
  }

  async appendTurns(turns: RecordedTurn[]): Promise<void> {
    for (const turn of turns) {
      this.appendLog.push(structuredClone(turn));
      if (!this.starts.has(turn.trajectoryId)) throw new TurnConflictError(`turn ${turn.turnId} of unknown trajectory ${turn.trajectoryId}`);
      // As the store: a turn of an attempt since restarted from the prompt is refused (outcome stale-attempt), not stored.
      if (turn.attempt !== undefined && turn.attempt !== (this.attempts.get(turn.trajectoryId) ?? 0)) continue;
      const stored = this.turnsByTrajectory.get(turn.trajectoryId) ?? [];
      const existing = stored[turn.turnIndex];
      if (existing) {
        if (existing.turnId === turn.turnId) continue;
        throw new TurnConflictError(`trajectory ${turn.trajectoryId} turn ${turn.turnIndex}: stored ${existing.turnId}, got ${turn.turnId}`);
      }
      if (turn.turnIndex !== stored.length) {
        throw new TurnConflictError(`trajectory ${turn.trajectoryId}: turn ${turn.turnIndex} appended after ${stored.length} turns`);
      }
      stored.push(structuredClone(turn));
      this.turnsByTrajectory.set(turn.trajectoryId, stored);
    }
  }

  async open(t: TrajectoryStart): Promise<StoredPrefix> {
    await this.start(t);
    return this.prefix(t.trajectoryId);
  }

  async prefix(trajectoryId: string): Promise<StoredPrefix> {
    return {
      attempt: this.attempts.get(trajectoryId) ?? 0,
      turns: (this.turnsByTrajectory.get(trajectoryId) ?? []).map((t) => ({
        turnIndex: t.turnIndex,
        kind: t.kind,
        content: structuredClone(t.content),
        weightVersion: t.weightVersion,
        // As the store: what the engines sampled, for a token prompt to be matched against.
        ...(t.spans ? { spans: structuredClone(t.spans) } : {}),
      })),
    };
  }

  /** As the store does: decide on the oldest generated version held; a restart starts a new attempt with no turns. */
  async continueWith(trajectoryId: string, request: ContinuationRequest): Promise<ContinuationDecision> {
    if (!this.starts.has(trajectoryId)) throw new Error(`trajectory ${trajectoryId} is not stored`);
    const c = request.continuation;
    const turns = this.turnsByTrajectory.get(trajectoryId) ?? [];
    const bound = c.maxStaleness === undefined ? undefined : { maxStaleness: c.maxStaleness };
    const decision = decideContinuation(policyVersionOf(turns), c.weightVersion, c.policy, bound);
    if (decision.action === 'restart-from-prompt') {
      this.attempts.set(trajectoryId, (this.attempts.get(trajectoryId) ?? 0) + 1);
      this.turnsByTrajectory.set(trajectoryId, []);
    }
    this.continuationLog.push({ trajectoryId, ...structuredClone(request), decision });
    return decision;
  }

  trajectory(trajectoryId: string): { start: TrajectoryStart | undefined; turns: RecordedTurn[] } {
    return { start: this.starts.get(trajectoryId), turns: [...(this.turnsByTrajectory.get(trajectoryId) ?? [])] };
  }

  trajectoryIds(): string[] {
    return [...this.starts.keys()];
  }
}
