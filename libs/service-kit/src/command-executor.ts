import { Logger } from '@nestjs/common';
import { Context, context } from '@opentelemetry/api';
import { Delivery, MessageBus, Subscription } from '@robustrl/bus';
import { MessageType, RobustrlMessage, TopicName } from '@robustrl/contracts';
import { EventStore } from '@robustrl/store';
import { injectTraceHeaders } from '@robustrl/telemetry';
import { OutboxRelay } from './outbox-relay';

/** What an executing command may do besides returning its outcome. */
export interface CommandContext {
  /**
   * Publish messages now, while the command is still being carried out (an announcement that must
   * reach the bus before the next action, e.g. a machine leaving before it is released). They go
   * through the executor's outbox like its outcome: committed first, then relayed. Resolves once they
   * are on the bus; rejects when the bus refuses them now, so the caller does not act ahead of its
   * announcement (they stay in the outbox and are published when the bus takes them).
   */
  emit(messages: readonly RobustrlMessage[]): Promise<void>;
}

export interface CommandExecutorSpec<C extends RobustrlMessage> {
  /** Consumer group, checkpoint, inbox and outbox name. */
  consumer: string;
  topics: readonly TopicName[];
  types: readonly C['type'][] & readonly MessageType[];
  /**
   * Carry the command out against the outside world and say how it went (the messages to publish).
   * Must not throw for an outcome it can describe: a failure is an event too.
   */
  execute: (command: C, context: CommandContext) => Promise<RobustrlMessage[]>;
}

/**
 * Runs commands that act on the world (an orchestrator, a cloud API), once each. After acting, one
 * transaction advances the consumer checkpoint, records the command's event id in the executor's
 * inbox and puts its outcome in the executor's outbox; the outbox is relayed to the bus after the
 * commit (the same OutboxRelay as the deciding consumer's). A redelivered command is recognised and
 * skipped, and an outcome is never lost to a crash after the commit: the relay publishes it on
 * restart. A crash between acting and that commit repeats the action, so `execute` must itself be
 * idempotent per command id (the orchestrator adapters are, per operation id).
 */
export class CommandExecutor<C extends RobustrlMessage> {
  private readonly logger: Logger;
  private readonly outbox: OutboxRelay;
  private subscription?: Subscription;

  constructor(
    private readonly bus: MessageBus,
    private readonly store: EventStore,
    private readonly spec: CommandExecutorSpec<C>,
  ) {
    this.logger = new Logger(spec.consumer);
    this.outbox = new OutboxRelay(bus, store, spec.consumer, this.logger);
  }

  async start(): Promise<void> {
    // Outcomes committed by a previous incarnation that did not reach the bus go first.
    await this.outbox.relay();
    this.subscription = await this.bus.subscribe({
      groupId: `robustrl-${this.spec.consumer}`,
      topics: this.spec.topics,
      types: this.spec.types,
      handler: (d) => this.onCommand(d as Delivery<C>),
    });
    this.outbox.startRetrying();
    this.logger.log(`executing ${this.spec.types.join(', ')}`);
  }

  async stop(): Promise<void> {
    this.outbox.stopRetrying();
    await this.subscription?.close();
    await this.outbox.relay();
  }

  private async onCommand(delivery: Delivery<C>): Promise<void> {
    const command = delivery.message;
    // Captured before the first await: the outcome stays in the command's trace whichever context manager the process runs.
    const trace = context.active();
    if (await this.store.inbox.has(this.store.dataSource.manager, this.spec.consumer, command.eventId)) return;
    const outcome = await this.spec.execute(command, { emit: (messages) => this.emit(messages, trace) });
    await this.store.applyOnce(this.spec.consumer, delivery, async (m) => {
      await this.store.inbox.add(m, this.spec.consumer, [command]);
      await this.store.outbox.enqueue(m, this.spec.consumer, traced(outcome, trace));
    });
    await this.outbox.relay();
  }

  private async emit(messages: readonly RobustrlMessage[], trace: Context): Promise<void> {
    if (messages.length === 0) return;
    await this.store.transaction((m) => this.store.outbox.enqueue(m, this.spec.consumer, traced(messages, trace)));
    if (!(await this.outbox.relay())) throw new Error(`the bus did not take ${messages.map((m) => m.type).join(', ')} now; it stays in the outbox`);
  }
}

/**
 * The relay publishes later, outside the command's handler: messages carry the handler's trace
 * context (as the deciding consumer's outputs do), so they stay in the command's trace.
 */
function traced(messages: readonly RobustrlMessage[], of: Context): RobustrlMessage[] {
  const trace = injectTraceHeaders(of);
  return messages.map((m) => (m.trace || !trace ? m : ({ ...m, trace } as RobustrlMessage)));
}
