import { Logger } from '@nestjs/common';
import { context, ROOT_CONTEXT } from '@opentelemetry/api';
import { MessageBus } from '@robustrl/bus';
import { RobustrlMessage } from '@robustrl/contracts';
import { EventStore } from '@robustrl/store';

/**
 * Publishes what one consumer put in its outbox, oldest first, and marks it published. The outbox
 * entry is written in the transaction that decided (or recorded) the message; this relay runs after
 * the commit, so a crash between the two loses nothing: the next relay (on start, on the next commit,
 * or on the retry timer) publishes what is still pending. Consumers de-duplicate by event id, so a
 * crash after publishing and before marking only repeats a publish.
 *
 * Shared by the deciding consumer and the command executor: every message a deciding service emits
 * leaves through here.
 */
export class OutboxRelay {
  private relaying: Promise<boolean> | null = null;
  /** The committed-messages loop, while it runs (it is also `relaying`). */
  private draining: Promise<boolean> | null = null;
  /** Committed, not yet handed to the bus: they leave in the loop's next publish. */
  private committed: RobustrlMessage[] = [];
  /** Marks of published entries still being written: a relay from the store waits for them (else it publishes those again). */
  private readonly marks = new Set<Promise<void>>();
  /** A relay failed (or its mark did): entries may be pending, so the next relay reads them first. Until the first relay, unknown. */
  private leftPending = true;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly bus: MessageBus,
    private readonly store: EventStore,
    private readonly consumer: string,
    private readonly logger: Logger,
  ) {}

  /** Pending entries of a failed relay are retried on a timer, not only on the next commit. */
  startRetrying(): void {
    clearInterval(this.timer);
    this.timer = setInterval(() => void this.relay(), 1_000);
  }

  stopRetrying(): void {
    clearInterval(this.timer);
  }

  /**
   * Publish what the outbox holds, oldest first; one relay at a time per process. True when it left
   * nothing pending, false when the bus refused (the entries stay for the next relay).
   */
  relay(): Promise<boolean> {
    if (this.relaying) return this.relaying.then(() => this.relayOnce());
    return this.relayOnce();
  }

  /**
   * Publish messages the caller has just committed to the outbox, without reading them back (the
   * latency path of a decision), then mark them published. Commits that arrive while a publish is under
   * way wait in memory and leave together in the next one, in commit order; the marks are written beside
   * the next publishes, not before them (a crash before a mark only repeats a publish). Only when nothing
   * older is pending: a relay from the store under way, or one that failed and left entries, goes first
   * (`relay`), so the order holds.
   */
  relayCommitted(messages: readonly RobustrlMessage[]): Promise<boolean> {
    if (this.leftPending || (this.relaying && !this.draining)) return this.relay();
    this.committed.push(...messages);
    if (this.draining) return this.draining;
    this.draining = this.drainCommitted();
    this.relaying = this.draining;
    return this.draining;
  }

  /** Publish what `relayCommitted` queued until the queue is empty; a refused publish leaves the rest to the store relay. */
  private async drainCommitted(): Promise<boolean> {
    try {
      while (this.committed.length > 0) {
        const batch = this.committed;
        this.committed = [];
        try {
          await context.with(ROOT_CONTEXT, () => this.bus.publish(batch));
        } catch (err) {
          // Still in the outbox, with whatever was queued behind them: the retry timer reads them back in order.
          this.committed = [];
          this.leftPending = true;
          this.logger.warn(`outbox relay failed, retrying in 1 s: ${err instanceof Error ? err.message : String(err)}`);
          return false;
        }
        const ids = batch.map((m) => m.eventId);
        // One statement, no transaction around it: a mark is idempotent.
        const marking = this.store.outbox.markPublishedIds(this.store.dataSource.manager, ids).catch((err: unknown) => {
          // Published but not marked: the next relay from the store publishes them again (same event ids).
          this.leftPending = true;
          this.logger.warn(`could not mark published outbox entries, they will be published again: ${String(err)}`);
        });
        this.marks.add(marking);
        void marking.finally(() => this.marks.delete(marking));
      }
      return true;
    } finally {
      // Right after the queue was last seen empty, with no await in between: a commit that comes later
      // starts a new loop instead of joining one that has ended.
      this.draining = null;
      this.relaying = null;
    }
  }

  private relayOnce(): Promise<boolean> {
    if (this.relaying) return this.relaying;
    this.relaying = (async () => {
      try {
        await Promise.all([...this.marks]);
        for (;;) {
          const pending = await this.store.outbox.pending(this.store.dataSource.manager, this.consumer, 100);
          if (pending.length === 0) {
            this.leftPending = false;
            return true;
          }
          // One publish for all of them (one produce request where they fit); each continues the trace
          // of the decision that produced it (the trace it carries), or starts one.
          await context.with(ROOT_CONTEXT, () => this.bus.publish(pending.map((p) => p.message)));
          await this.store.transaction((manager) =>
            this.store.outbox.markPublished(
              manager,
              pending.map((p) => p.position),
            ),
          );
          if (pending.length < 100) return true;
        }
      } catch (err) {
        this.leftPending = true;
        this.logger.warn(`outbox relay failed, retrying in 1 s: ${err instanceof Error ? err.message : String(err)}`);
        return false;
      } finally {
        this.relaying = null;
      }
    })();
    return this.relaying;
  }
}
