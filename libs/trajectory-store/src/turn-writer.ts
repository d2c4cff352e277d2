import { AppendOutcome, AppendResult, TurnInput } from '@robustrl/contracts';
import { GroupBatch } from './group-batch';
import { DURABLE_OUTCOMES, TrajectoryStore } from './trajectory-store';
import { RobustrlError } from '@robustrl/bus';

export interface TurnWriterOptions {
  /** How long an append waits for company before its batch is written. */
  flushIntervalMs?: number;
  /** A batch this large is written at once, without waiting for the interval. */
  maxBatch?: number;
  /**
   * Batches written at the same time. Two keep the database busy while the next batch is being
   * collected and encoded; more only queue on a 2-core machine.
   */
  maxConcurrentFlushes?: number;
}

/** The turn was valid but not stored; `outcome` says why (see AppendOutcome). */
export class TurnRejectedError extends RobustrlError {
  constructor(
    readonly turnId: string,
    readonly outcome: Exclude<AppendOutcome, 'new' | 'duplicate'>,
  ) {
    super(`turn '${turnId}' was not stored: ${outcome}`);
  }
}

/**
 * Batched turn writes: each `append` resolves once its turn is durable (committed), with `new` or
 * `duplicate`. Appends are collected and written as one multi-row statement (TrajectoryStore.appendTurns)
 * every `flushIntervalMs` or as soon as `maxBatch` are waiting — one round trip and one commit for
 * hundreds of turns, which is what turns a few hundred appends/s into thousands on 2 cores. With
 * `flushIntervalMs` 0 it is a group commit: a turn alone goes out at once, and turns that arrive while
 * the batches in flight are written go out together next (group-batch.ts).
 *
 * A flush that fails rejects exactly the appends it carried (the next batch is unaffected; callers retry,
 * and turn ids make a retry of something that did commit harmless). A turn the store refuses (unknown
 * trajectory, closed, …) rejects its own caller with TurnRejectedError. Turns are not validated here:
 * callers hand in TurnInput as parsed at the edge.
 */
export class TurnWriter {
  private readonly batch: GroupBatch<TurnInput, AppendResult>;

  constructor(store: TrajectoryStore, options: TurnWriterOptions = {}) {
    const maxBatch = options.maxBatch ?? 500;
    const flushIntervalMs = options.flushIntervalMs ?? 5;
    const maxConcurrentFlushes = options.maxConcurrentFlushes ?? 2;
    if (!(maxBatch >= 1) || !(flushIntervalMs >= 0) || !(maxConcurrentFlushes >= 1)) {
      throw new Error(`TurnWriter: maxBatch and maxConcurrentFlushes must be >= 1 and flushIntervalMs >= 0`);
    }
    this.batch = new GroupBatch((turns) => store.appendTurns(turns), { maxBatch, flushIntervalMs, maxConcurrent: maxConcurrentFlushes });
  }

  /** Statements written (one per flush). */
  get flushes(): number {
    return this.batch.batches;
  }

  async append(turn: TurnInput): Promise<'new' | 'duplicate'> {
    const result = await this.batch.submit(turn);
    if (DURABLE_OUTCOMES.has(result.outcome)) return result.outcome as 'new' | 'duplicate';
    throw new TurnRejectedError(result.turnId, result.outcome as Exclude<AppendOutcome, 'new' | 'duplicate'>);
  }

  appendMany(turns: readonly TurnInput[]): Promise<Array<'new' | 'duplicate'>> {
    return Promise.all(turns.map((t) => this.append(t)));
  }

  /** Write everything appended so far and wait for it. */
  flush(): Promise<void> {
    return this.batch.flush();
  }

  /** Refuse new appends, write what is waiting. */
  close(): Promise<void> {
    return this.batch.close();
  }
}
