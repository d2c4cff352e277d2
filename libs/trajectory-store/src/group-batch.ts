/** What a batch function answers for each item it was given, in the items' order. */
export type BatchFn<I, O> = (items: I[]) => Promise<O[]>;

export interface GroupBatchOptions {
  /**
   * How long the first item waits for company before its batch goes out. 0: the batch leaves as soon as
   * a slot is free (after the items handed in within the same turn of the event loop) — the latency of
   * one item alone is one statement, and under load the batches grow by themselves while every slot is
   * busy, as in a database's group commit.
   */
  flushIntervalMs?: number;
  /** A batch this large goes out at once. */
  maxBatch?: number;
  /** Batches in flight at the same time. */
  maxConcurrent?: number;
}

interface Pending<I, O> {
  item: I;
  resolve(value: O): void;
  reject(err: unknown): void;
}

/**
 * Items handed in one by one, written (or read) many per statement: `submit` resolves with the batch
 * function's answer for its item. A batch that fails rejects exactly the items it carried; the next
 * batch is unaffected. The trajectory store's writers and readers share it (TurnWriter, the router's
 * recorder), so a busy store does one statement and one commit for hundreds of turns.
 */
export class GroupBatch<I, O> {
  private readonly flushIntervalMs: number;
  private readonly maxBatch: number;
  private readonly maxConcurrent: number;
  private buffer: Array<Pending<I, O>> = [];
  private timer: NodeJS.Timeout | null = null;
  private scheduled = false;
  private readonly inFlight = new Set<Promise<void>>();
  private closed = false;
  /** Batches written (one statement each). */
  batches = 0;

  constructor(
    private readonly run: BatchFn<I, O>,
    options: GroupBatchOptions = {},
  ) {
    this.flushIntervalMs = options.flushIntervalMs ?? 0;
    this.maxBatch = options.maxBatch ?? 500;
    this.maxConcurrent = options.maxConcurrent ?? 2;
    if (!(this.maxBatch >= 1) || !(this.flushIntervalMs >= 0) || !(this.maxConcurrent >= 1)) {
      throw new Error('GroupBatch: maxBatch and maxConcurrent must be >= 1 and flushIntervalMs >= 0');
    }
  }

  submit(item: I): Promise<O> {
    if (this.closed) return Promise.reject(new Error('the batch writer is closed'));
    return new Promise<O>((resolve, reject) => {
      this.buffer.push({ item, resolve, reject });
      if (this.buffer.length >= this.maxBatch) this.kick();
      else if (this.flushIntervalMs > 0) this.timer ??= setTimeout(() => this.kick(), this.flushIntervalMs);
      else if (!this.scheduled) {
        // Items handed in by the same event-loop turn (one request's turns, a burst of callbacks) share a batch.
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.kick();
        });
      }
    });
  }

  /** Write everything handed in so far and wait for it. */
  async flush(): Promise<void> {
    this.kick();
    while (this.inFlight.size > 0) {
      await Promise.race(this.inFlight);
      this.kick();
    }
  }

  /** Refuse new items, write what is waiting. */
  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
  }

  /** Send what is buffered, at most maxBatch a statement, as far as free slots allow; runs again as each batch ends. */
  private kick(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    while (this.buffer.length > 0 && this.inFlight.size < this.maxConcurrent) {
      const batch = this.buffer.splice(0, this.maxBatch);
      const done: Promise<void> = this.write(batch).finally(() => {
        this.inFlight.delete(done);
        if (this.buffer.length > 0) this.kick();
      });
      this.inFlight.add(done);
    }
  }

  private async write(batch: Array<Pending<I, O>>): Promise<void> {
    this.batches += 1;
    let results: O[];
    try {
      results = await this.run(batch.map((p) => p.item));
    } catch (err) {
      for (const p of batch) p.reject(err);
      return;
    }
    batch.forEach((p, i) => p.resolve(results[i]));
  }
}
