import { AppendResult, ContinuationDecision, isStorableStart, isStorableTurn, NewTrajectory, StartResult, StatusChange, TurnInput } from '@robustrl/contracts';
import { AttemptPrefix, GroupBatch, GroupBatchOptions, OpenResult, TrajectoryNotFoundError, TrajectoryStore } from '@robustrl/trajectory-store';
import {
  ContinuationRequest,
  RecordedTurn,
  RecordRefusedError,
  StoredPrefix,
  TrajectoryRecorder,
  TrajectoryStart,
  TurnConflictError,
} from './trajectory-recorder';

/**
 * The router's recorder in a deployment: the trajectory store itself, in the request manager's
 * PostgreSQL, with no HTTP hop in between (docs/router.md "Recording"). Every call of every request in
 * flight joins a group: one statement reads the prefixes of all the trajectories asked for, one starts
 * all the new ones, one appends all the turns — one round trip and one commit for hundreds of requests
 * under load, a single statement for a request alone.
 *
 * The guarantee is the store's: `appendTurns` resolves once the turns are committed (the router's
 * session asks for synchronous commit, recording-store.ts), and the router ends an answer only after.
 * Turn ids make every write idempotent, so a request retried on another router replica stores once.
 *
 * What the store answers maps to the port's errors as the HTTP API's statuses did: a start that
 * contradicts a stored trajectory, or a turn the store refuses (index taken, closed, stale attempt),
 * is a TurnConflictError; a turn of a trajectory not stored is an error to ask again for.
 */
export class StoreTrajectoryRecorder implements TrajectoryRecorder {
  private readonly reads: GroupBatch<string, AttemptPrefix | undefined>;
  private readonly starts: GroupBatch<NewTrajectory, StartResult>;
  private readonly opens: GroupBatch<NewTrajectory, OpenResult>;
  private readonly appends: GroupBatch<RecordedTurn, AppendResult>;

  constructor(
    private readonly store: TrajectoryStore,
    /** How the statements of requests in flight are grouped (group-batch.ts; its defaults measured best in bench:router). */
    batching: GroupBatchOptions = {},
  ) {
    this.reads = new GroupBatch(async (ids) => {
      const found = await store.prefixes([...new Set(ids)]);
      return ids.map((id) => found.get(id));
    }, batching);
    this.starts = new GroupBatch((trajectories) => store.startTrajectories(trajectories), batching);
    this.opens = new GroupBatch((trajectories) => store.openTrajectories(trajectories), batching);
    this.appends = new GroupBatch((turns) => store.appendTurns(turns), batching);
  }

  async start(t: TrajectoryStart): Promise<void> {
    const result = await this.starts.submit(checked(t));
    if (result.outcome === 'conflict') throw slotConflict(t);
  }

  /** Start and read in one statement, shared with every other request opening a trajectory now. */
  async open(t: TrajectoryStart): Promise<StoredPrefix> {
    const result = await this.opens.submit(checked(t));
    if (result.outcome === 'created' || result.outcome === 'existing') return result.prefix;
    if (result.outcome === 'conflict') throw slotConflict(t);
    // Opened by another replica in the same instant (a retry racing its original): asking again reads it.
    throw new Error(`trajectory ${t.trajectoryId} is being opened by another request`);
  }

  async appendTurns(turns: RecordedTurn[]): Promise<void> {
    // Checked with the store's own contract, as the HTTP API would: a turn it cannot hold is the caller's 400.
    // The schema only where the quick check is unsure: it says what is wrong (trajectory-input-checks.ts).
    for (const t of turns) {
      if (isStorableTurn(t)) continue;
      const parsed = TurnInput.safeParse(t);
      if (!parsed.success)
        throw new RecordRefusedError(`turn ${t.turnIndex} cannot be stored: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    }
    const results = await Promise.all(turns.map((t) => this.appends.submit(t)));
    const refused = results.filter((r) => r.outcome !== 'new' && r.outcome !== 'duplicate');
    if (refused.length === 0) return;
    const text = refused.map((r) => `${r.turnId}: ${r.outcome}`).join(', ');
    // Not stored yet (its start lost, e.g. to a store restart between the calls): asking again starts it again.
    if (refused.every((r) => r.outcome === 'unknown-trajectory')) throw new Error(`the trajectory store does not hold the trajectory of ${text}`);
    throw new TurnConflictError(`the trajectory store refused turns: ${text}`);
  }

  async prefix(trajectoryId: string): Promise<StoredPrefix> {
    const found = await this.reads.submit(trajectoryId);
    return found ?? { attempt: 0, turns: [] };
  }

  /** The store decides under the trajectory's row lock (staleness-policy.ts), and drops the turns on a restart. */
  async continueWith(trajectoryId: string, request: ContinuationRequest): Promise<ContinuationDecision> {
    const change: StatusChange = { status: 'in-flight', rolloutId: request.rolloutId, continuation: request.continuation };
    let answer;
    try {
      answer = await this.store.setStatus(trajectoryId, change);
    } catch (err) {
      if (err instanceof TrajectoryNotFoundError) throw new Error(`trajectory ${trajectoryId} is not stored`);
      throw err;
    }
    if (answer.continuation === null) throw new Error(`the trajectory store decided no continuation for ${trajectoryId} (it is completed or aborted)`);
    return answer.continuation;
  }

  /** Write what was handed in, then refuse more: the router's shutdown. */
  async close(): Promise<void> {
    await Promise.all([this.reads.close(), this.starts.close(), this.opens.close(), this.appends.close()]);
  }
}

function checked(t: TrajectoryStart): NewTrajectory {
  // The schema's answer without it where the quick check is sure; its output keeps only the contract's fields.
  if (isStorableStart(t)) {
    const { trajectoryId, jobId, batchId, step, promptId, sampleIndex, prompt, ownerRolloutId } = t;
    return { trajectoryId, jobId, batchId, step, promptId, sampleIndex, prompt, ...(ownerRolloutId !== undefined ? { ownerRolloutId } : {}) };
  }
  const parsed = NewTrajectory.safeParse(t);
  if (!parsed.success) throw new RecordRefusedError(`the trajectory's start cannot be stored: ${parsed.error.message}`);
  return parsed.data;
}

function slotConflict(t: TrajectoryStart): TurnConflictError {
  return new TurnConflictError(`another trajectory id holds job ${t.jobId}, batch ${t.batchId}, prompt ${t.promptId}, sample ${t.sampleIndex}`);
}
