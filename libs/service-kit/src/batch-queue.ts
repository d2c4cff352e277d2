import { DeliveryBatch } from '@robustrl/bus';
import { ReloadingError, Reloads } from './deciding-types';

/** Batches handed over by the bus and not yet decided, over all partitions, before the bus is made to wait. */
export const MAX_BATCHES_QUEUED = 4;

/**
 * The batches a deciding consumer was handed and has not decided yet: each partition's in order, one
 * after the other, while the bus fetches the partition's next records (the bus commits nothing before a
 * snapshot, so a batch handed back early is delivered again after a crash). A batch whose decision
 * fails starts a reload, unless one is under way already.
 */
export class BatchQueue {
  /** Per `topic/partition`: the last batch handed over to be decided (each waits for the one before). */
  private readonly streamTails = new Map<string, Promise<void>>();
  private batchesQueued = 0;

  constructor(
    private readonly decide: (batch: DeliveryBatch) => Promise<void>,
    private readonly reloads: Reloads,
  ) {}

  /** How many batches wait (or are being decided), over all partitions. */
  get queued(): number {
    return this.batchesQueued;
  }

  /**
   * Hands the batch to its partition's queue and returns: each partition's batches are decided in
   * order; a few wait at most (past `MAX_BATCHES_QUEUED` this returns once the batch is decided).
   */
  async hand(batch: DeliveryBatch): Promise<void> {
    const stream = `${batch.topic}/${batch.partition}`;
    const run = (this.streamTails.get(stream) ?? Promise.resolve())
      .then(() => this.decide(batch))
      .catch((err) => {
        // A reload is under way: consumption starts over from the last snapshot, this batch included.
        if (err instanceof ReloadingError || this.reloads.stale) return;
        // The store did not answer (an evicted job's snapshot, the inbox), or something unforeseen: the same.
        this.reloads.begin(err);
      });
    this.streamTails.set(stream, run);
    this.batchesQueued += 1;
    void run.finally(() => (this.batchesQueued -= 1));
    if (this.batchesQueued > MAX_BATCHES_QUEUED) await run;
  }

  /** Until every batch handed over so far was decided (or dropped for a reload). */
  async drain(): Promise<void> {
    await Promise.all([...this.streamTails.values()]);
  }
}
