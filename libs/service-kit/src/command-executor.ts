import { Logger } from '@nestjs/common';
import { Delivery, MessageBus, Subscription } from '@robustrl/bus';
import { MessageType, RobustrlMessage, TopicName } from '@robustrl/contracts';
import { EventStore } from '@robustrl/store';

export interface CommandExecutorSpec<C extends RobustrlMessage> {
  /** Consumer group, checkpoint and inbox name. */
  consumer: string;
  topics: readonly TopicName[];
  types: readonly C['type'][] & readonly MessageType[];
  /**
   * Carry the command out against the outside world and say how it went (the messages to publish).
   * Must not throw for an outcome it can describe: a failure is an event too.
   */
  execute: (command: C) => Promise<RobustrlMessage[]>;
}

/**
 * Runs commands that act on the world (an orchestrator, a cloud API), once each. The command's event
 * id goes into the executor's inbox, with the consumer checkpoint, after its outcome is published:
 * a redelivered command is recognised and skipped. A crash between acting and recording repeats
 * the action, so `execute` must itself be idempotent per command id (the orchestrator adapters are,
 * per operation id).
 */
export class CommandExecutor<C extends RobustrlMessage> {
  private readonly logger: Logger;
  private subscription?: Subscription;

  constructor(
    private readonly bus: MessageBus,
    private readonly store: EventStore,
    private readonly spec: CommandExecutorSpec<C>,
  ) {
    this.logger = new Logger(spec.consumer);
  }

  async start(): Promise<void> {
    this.subscription = await this.bus.subscribe({
      groupId: `robustrl-${this.spec.consumer}`,
      topics: this.spec.topics,
      types: this.spec.types,
      handler: (d) => this.onCommand(d as Delivery<C>),
    });
    this.logger.log(`executing ${this.spec.types.join(', ')}`);
  }

  async stop(): Promise<void> {
    await this.subscription?.close();
  }

  private async onCommand(delivery: Delivery<C>): Promise<void> {
    const command = delivery.message;
    const seen: unknown[] = await this.store.dataSource.query(`SELECT 1 FROM robustrl_inbox WHERE consumer = $1 AND event_id = $2`, [this.spec.consumer, command.eventId]);
    if (seen.length > 0) return;
    const outcome = await this.spec.execute(command);
    await this.bus.publish(outcome);
    await this.store.applyOnce(this.spec.consumer, delivery, async (m) => {
      await this.store.inbox.add(m, this.spec.consumer, [command]);
    });
  }
}
