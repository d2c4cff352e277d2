import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@nestjs/common';
import { Delivery, MessageBus, toDeadLetterRecord } from '@robustrl/bus';
import { encodeMessage } from '@robustrl/contracts';
import { ReloadingError, Reloads } from './deciding-types';

/** Attempts at deciding on one message before it is dead-lettered instead (a decider that throws on it). */
export const POISON_ATTEMPTS = 3;

/** What poison handling works with. */
export interface PoisonParts {
  bus: Pick<MessageBus, 'publishRaw' | 'maxRecordBytes'>;
  /** The consumer group, named in the dead letter. */
  groupId: string;
  reloads: Pick<Reloads, 'begin'>;
  /** Whether the decider evolves its states in place (`Decider.evolution`): one that threw may have left its job half-changed. */
  inPlace: boolean;
  isStopped: () => boolean;
  clock: () => number;
  logger: Logger;
}

/**
 * Messages a decider throws on (docs/contributors/delivery-guarantees.md). A decider that throws on a message
 * leaves the job's state in doubt: the state reloads and the message comes again; after
 * `POISON_ATTEMPTS` the message is dead-lettered with the error instead of decided on.
 */
export class PoisonMessages {
  /** Event ids whose decision threw, with how often. */
  private readonly poison = new Map<string, number>();

  constructor(private readonly parts: PoisonParts) {}

  /**
   * `decide` on the delivery; when it throws, a reload begins and `ReloadingError` is thrown, or on the
   * last attempt the message is dead-lettered and null returned (a decider evolving in place reloads
   * and throws then too).
   */
  guard<T>(delivery: Delivery, decide: () => T): T | null {
    const input = delivery.message;
    try {
      return decide();
    } catch (err) {
      const attempts = (this.poison.get(input.eventId) ?? 0) + 1;
      this.poison.set(input.eventId, attempts);
      if (attempts < POISON_ATTEMPTS) {
        this.parts.reloads.begin(new Error(`deciding on ${input.type} ${input.eventId} threw: ${String(err)}`));
        throw new ReloadingError();
      }
      this.parts.logger.error(`deciding on ${input.type} ${input.eventId} threw ${attempts} times; dead-lettering it: ${String(err)}`);
      void this.deadLetter(delivery, err);
      if (this.parts.inPlace) {
        // The evolve that threw may have left the job half-changed: start over from the store.
        this.parts.reloads.begin(new Error(`deciding on ${input.type} ${input.eventId} threw`));
        throw new ReloadingError();
      }
      return null;
    }
  }

  private async deadLetter(delivery: Delivery, err: unknown): Promise<void> {
    const { bus, logger } = this.parts;
    const record = toDeadLetterRecord(
      {
        topic: delivery.topic,
        partition: delivery.partition,
        offset: delivery.offset,
        key: delivery.key,
        value: encodeMessage(delivery.message),
        headers: { ...delivery.headers },
      },
      {
        kind: 'handler-failed',
        reason: `deciding on it threw ${POISON_ATTEMPTS} times: ${String(err)}`,
        groupId: this.parts.groupId,
        at: new Date(this.parts.clock()),
      },
      bus.maxRecordBytes,
    );
    // The decision is skipped only once its dead letter is written: until then it stays in the poison count and is retried.
    for (let attempt = 1; !this.parts.isStopped(); attempt++) {
      try {
        await bus.publishRaw(record);
        return;
      } catch (e) {
        logger.error(`writing the dead letter of ${delivery.message.eventId} failed (attempt ${attempt}): ${String(e)}`);
        await sleep(Math.min(5_000, 100 * 2 ** attempt));
      }
    }
  }
}
