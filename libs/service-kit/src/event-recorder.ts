import { Logger } from '@nestjs/common';
import { MessageBus, Subscription } from '@robustrl/bus';
import { MessageType, TopicName } from '@robustrl/contracts';
import { EventStore } from '@robustrl/store';

export interface RecorderSpec {
  /** Consumer group and checkpoint name, e.g. `detector`. */
  consumer: string;
  topics: readonly TopicName[];
  types?: readonly MessageType[];
}

/**
 * The shell every service starts from: consume its input topics and record each message in the
 * event log exactly once (checkpoint compare-and-set in the same transaction). Service rules plug in
 * here as deciders in later issues; the consume → validate → append → checkpoint path is shared.
 */
export class EventRecorder {
  private subscription?: Subscription;
  private readonly logger: Logger;
  recorded = 0;
  duplicates = 0;

  constructor(
    private readonly bus: MessageBus,
    private readonly store: EventStore,
    private readonly spec: RecorderSpec,
  ) {
    this.logger = new Logger(spec.consumer);
  }

  async start(): Promise<void> {
    this.subscription = await this.bus.subscribe({
      groupId: `robustrl-${this.spec.consumer}`,
      topics: this.spec.topics,
      types: this.spec.types,
      handler: async (delivery) => {
        const outcome = await this.store.record(this.spec.consumer, delivery, delivery.message);
        if (outcome === 'applied') this.recorded += 1;
        else this.duplicates += 1;
      },
    });
    this.logger.log(`consuming ${this.spec.topics.join(', ')}`);
  }

  async stop(): Promise<void> {
    await this.subscription?.close();
  }
}
