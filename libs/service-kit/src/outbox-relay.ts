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
   * latency path of a decision), then mark them published. Only when nothing older is pending: a relay
   * under way, or one that failed and left entries, goes first (`relay`), so the order holds.
   */
  relayCommitted(messages: readonly RobustrlMessage[]): Promise<boolean> {
    if (this.relaying || this.leftPending) return this.relay();
    this.relaying = (async () => {
      try {
        await context.with(ROOT_CONTEXT, () => this.bus.publish(messages));
        // Published: a crash before this mark only publishes them again (same event ids; consumers de-duplicate).
        await this.store.transaction((manager) =>
          this.store.outbox.markPublishedIds(
            manager,
            messages.map((m) => m.eventId),
          ),
        );
        return true;
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

  private relayOnce(): Promise<boolean> {
    if (this.relaying) return this.relaying;
    this.relaying = (async () => {
      try {
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
