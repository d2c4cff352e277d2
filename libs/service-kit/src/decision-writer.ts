import { Logger } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { RobustrlMessage } from '@robustrl/contracts';
import { EventStore, writeDecision } from '@robustrl/store';
import { PendingWrite, ReloadingError, Reloads } from './deciding-types';
import { OutboxRelay } from './outbox-relay';

/** Batch writes committing while the next batches are decided (bounds memory when the store is slower than the bus). */
export const MAX_WRITES_IN_FLIGHT = 4;

/** Who hears of what committed (`DecidingConsumerSpec.onEmitted`, `onApplied`). */
export interface CommitListeners<Input extends RobustrlMessage = RobustrlMessage> {
  onEmitted?: (messages: readonly RobustrlMessage[], jobId: string) => void;
  onApplied?: (input: Input, emitted: readonly RobustrlMessage[]) => void;
}

/**
 * The writes of a deciding consumer (docs/contributors/delivery-guarantees.md): each batch, tick or host input is
 * written in one transaction — the stream's checkpoint, the facts it applied and the outputs it
 * decided (inbox, event log, outbox) — chained in the order decided, and its outbox is relayed after
 * the commit. A write that fails starts a reload (`Reloads.begin`), and while the state reloads every
 * write is refused (`ReloadingError`): the states in memory hold what did not commit.
 */
export class DecisionWriter<Input extends RobustrlMessage = RobustrlMessage> {
  /** Facts applied whose write has not committed yet (event ids): a duplicate in a later batch is seen before the inbox has them. */
  readonly appliedFacts = new Set<string>();
  private readonly writesInFlight = new Set<Promise<void>>();
  /** Every write, in the order decided; a failed one fails those after it. */
  private writeChain: Promise<void> = Promise.resolve();
  private readonly outbox: OutboxRelay;

  /** @param name the consumer's store name (its inbox, checkpoints and outbox rows). */
  constructor(
    bus: MessageBus,
    private readonly store: EventStore,
    private readonly name: string,
    private readonly reloads: Reloads,
    private readonly listeners: CommitListeners<Input>,
    logger: Logger,
  ) {
    this.outbox = new OutboxRelay(bus, store, name, logger);
  }

  /**
   * Run `work` after every write chained before it (a snapshot is chained too: it covers what committed
   * before it). Refused with `ReloadingError` while the state reloads; its failure is the caller's.
   */
  chain(work: () => Promise<void>): Promise<void> {
    const run = this.writeChain.then(async () => {
      if (this.reloads.stale) throw new ReloadingError();
      await work();
    });
    this.writeChain = run.catch(() => undefined);
    return run;
  }

  /** Until every write chained so far has settled (committed or failed). */
  settled(): Promise<void> {
    return this.writeChain;
  }

  /** After a reload: the writes before it went with the states they came from; the next write waits for none. */
  resetChain(): void {
    this.writeChain = Promise.resolve();
  }

  /** Chain a write after those decided before it; a failure (or a reload under way) fails it and starts a reload. */
  async commit(write: PendingWrite): Promise<void> {
    const run = this.chain(async () => {
      // One statement, one round trip (it is on the path of every recovery).
      const advanced = await writeDecision(this.store.dataSource.manager, {
        consumer: this.name,
        ...(write.checkpoint ? { checkpoint: { stream: write.checkpoint.stream, position: write.checkpoint.offset } } : {}),
        applied: write.applied,
        outbox: write.outbox,
      });
      if (!advanced) throw new Error(`checkpoint of ${write.checkpoint!.stream} is already past ${write.checkpoint!.offset}: another process consumes it`);
    });
    try {
      await run;
    } catch (err) {
      this.reloads.begin(err);
      throw err instanceof ReloadingError ? err : new Error(`write failed, state reloads: ${String(err)}`, { cause: err });
    }
    this.reloads.committed();
    // Committed: the inbox answers for these from now on (the set only covers writes in flight).
    for (const m of write.applied) this.appliedFacts.delete(m.eventId);
    this.afterCommit(write);
  }

  /**
   * The next batch is decided while this one commits: the bus commits nothing before a snapshot, and a
   * write that fails reloads from the last snapshot and consumes again from there, so a batch handed
   * back before its write committed is never lost. A few writes at most are in flight: returns once
   * there are no more than `MAX_WRITES_IN_FLIGHT`.
   */
  async commitInFlight(write: PendingWrite): Promise<void> {
    const committing = this.commit(write).catch(() => undefined);
    this.writesInFlight.add(committing);
    void committing.finally(() => this.writesInFlight.delete(committing));
    while (this.writesInFlight.size > MAX_WRITES_IN_FLIGHT) await Promise.race(this.writesInFlight);
  }

  private afterCommit(write: PendingWrite): void {
    for (const [jobId, emitted] of write.emitted) if (emitted.length > 0) this.listeners.onEmitted?.(emitted, jobId);
    if (this.listeners.onApplied) for (const { input, emitted } of write.inputs) this.listeners.onApplied(input as Input, emitted);
    if (write.outbox.length > 0) void this.outbox.relayCommitted(write.outbox);
  }

  /** Publish what the outbox holds, oldest first (true when nothing is left pending). */
  relay(): Promise<boolean> {
    return this.outbox.relay();
  }

  /** Pending outbox entries of a failed relay are retried on a timer, not only on the next message. */
  startRetrying(): void {
    this.outbox.startRetrying();
  }

  stopRetrying(): void {
    this.outbox.stopRetrying();
  }
}
