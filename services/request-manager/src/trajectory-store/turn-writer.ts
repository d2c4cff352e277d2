import { AppendOutcome, TurnInput } from '@robustrl/contracts';
import { DURABLE_OUTCOMES, TrajectoryStore } from './trajectory-store';

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
export class TurnRejectedError extends Error {
  constructor(
    readonly turnId: string,
    readonly outcome: Exclude<AppendOutcome, 'new' | 'duplicate'>,
  ) {
    super(`turn '${turnId}' was not stored: ${outcome}`);
    this.name = 'TurnRejectedError';
  }
}

interface Pending {
  turn: TurnInput;
  resolve(outcome: 'new' | 'duplicate'): void;
  reject(err: unknown): void;
}

/**
 * Batched turn writes: each `append` resolves once its turn is durable (committed), with `new` or
 * `duplicate`. Appends are collected and written as one multi-row statement (TrajectoryStore.appendTurns)
 * every `flushIntervalMs` or as soon as `maxBatch` are waiting — one round trip and one commit for
 * hundreds of turns, which is what turns a few hundred appends/s into thousands on 2 cores.
 *
 * A flush that fails rejects exactly the appends it carried (the next batch is unaffected; callers retry,
 * and turn ids make a retry of something that did commit harmless). A turn the store refuses (unknown
 * trajectory, closed, …) rejects its own caller with TurnRejectedError. Turns are not validated here:
 * callers hand in TurnInput as parsed at the edge.
 */
export class TurnWriter {
  private readonly flushIntervalMs: number;
  private readonly maxBatch: number;
  private readonly maxConcurrentFlushes: number;
  private buffer: Pending[] = [];
  private timer: NodeJS.Timeout | null = null;
  private readonly inFlight = new Set<Promise<void>>();
  private closed = false;
  /** Statements written (one per flush). */
  flushes = 0;

  constructor(
    private readonly store: TrajectoryStore,
    options: TurnWriterOptions = {},
  ) {
    this.flushIntervalMs = options.flushIntervalMs ?? 5;
    this.maxBatch = options.maxBatch ?? 500;
    this.maxConcurrentFlushes = options.maxConcurrentFlushes ?? 2;
    if (!(this.maxBatch >= 1) || !(this.flushIntervalMs >= 0) || !(this.maxConcurrentFlushes >= 1)) {
      throw new Error(`TurnWriter: maxBatch and maxConcurrentFlushes must be >= 1 and flushIntervalMs >= 0`);
    }
  }

  append(turn: TurnInput): Promise<'new' | 'duplicate'> {
    if (this.closed) return Promise.reject(new Error('TurnWriter is closed'));
    return new Promise((resolve, reject) => {
      this.buffer.push({ turn, resolve, reject });
      if (this.buffer.length >= this.maxBatch) this.kick();
      else this.timer ??= setTimeout(() => this.kick(), this.flushIntervalMs);
    });
  }

  appendMany(turns: readonly TurnInput[]): Promise<Array<'new' | 'duplicate'>> {
    return Promise.all(turns.map((t) => this.append(t)));
  }

  /** Write everything appended so far and wait for it. */
  async flush(): Promise<void> {
    this.kick();
    while (this.inFlight.size > 0) {
      await Promise.race(this.inFlight);
      this.kick();
    }
  }

  /** Refuse new appends, write what is waiting. */
  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
  }

  /**
   * Write what is buffered, in batches of at most maxBatch, as far as free flush slots allow. Runs when
   * the interval passed, a batch filled up, or a flush finished: appends that piled up while every slot
   * was busy go out right away (under load the batches grow by themselves, like a group commit).
   */
  private kick(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (this.buffer.length > 0 && this.inFlight.size < this.maxConcurrentFlushes) {
      const batch = this.buffer.splice(0, this.maxBatch);
      const done: Promise<void> = this.write(batch).finally(() => {
        this.inFlight.delete(done);
        if (this.buffer.length > 0) this.kick();
      });
      this.inFlight.add(done);
    }
  }

  private async write(batch: Pending[]): Promise<void> {
    this.flushes += 1;
    let results;
    try {
      results = await this.store.appendTurns(batch.map((p) => p.turn));
    } catch (err) {
      for (const p of batch) p.reject(err);
      return;
    }
    results.forEach((r, i) => {
      if (DURABLE_OUTCOMES.has(r.outcome)) batch[i].resolve(r.outcome as 'new' | 'duplicate');
      else batch[i].reject(new TurnRejectedError(r.turnId, r.outcome as Exclude<AppendOutcome, 'new' | 'duplicate'>));
    });
  }
}
