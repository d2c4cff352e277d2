import { randomUUID } from 'node:crypto';
import { Consumer, Kafka, logLevel } from 'kafkajs';
import { DeadLetter, fromDeadLetterRecord, KafkaBus, Subscription } from '@robustrl/bus';
import { DEAD_LETTER_TOPIC, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';

/** What the observer keeps of the control plane's output (and the agent's answers) for the checks. */
const OBSERVED_TYPES: MessageType[] = [
  'FaultSuspected',
  'FaultConfirmed',
  'SuspicionCleared',
  'DetectionPaused',
  'DetectionResumed',
  'MachineRegistered',
  'RecoveryCommandSucceeded',
  'RecoveryCommandFailed',
];

/** Reads the dead-letter topic (kafkajs, no robustrl code) and the control plane's output (the bus), for the scorecard. */
export class Observer {
  readonly deadLetters: DeadLetter[] = [];
  readonly seen: RobustrlMessage[] = [];
  private consumer?: Consumer;
  private subscription?: Subscription;

  constructor(
    private readonly brokers: string[],
    private readonly topicPrefix: string,
    private readonly bus: KafkaBus,
  ) {}

  async start(): Promise<void> {
    const kafka = new Kafka({ brokers: this.brokers, clientId: 'chaos-observer', logLevel: logLevel.NOTHING });
    this.consumer = kafka.consumer({ groupId: `chaos-observer-${randomUUID()}` });
    await this.consumer.connect();
    await this.consumer.subscribe({ topic: this.topicPrefix + DEAD_LETTER_TOPIC, fromBeginning: true });
    await this.consumer.run({
      eachMessage: async ({ message }) => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(message.headers ?? {})) if (v !== undefined) headers[k] = String(Array.isArray(v) ? v[0] : v);
        const deadLetter = fromDeadLetterRecord({ key: message.key?.toString() ?? null, value: message.value, headers });
        // The control plane's dead letters; the run's own readers (agents, this observer) keep no ledger and do not count.
        if (deadLetter.consumerGroup.startsWith('robustrl-')) this.deadLetters.push(deadLetter);
      },
    });
    this.subscription = await this.bus.subscribe({
      groupId: `chaos-verdicts-${randomUUID()}`,
      topics: [Topics.verdicts, Topics.membership, Topics.control, Topics.replies],
      types: OBSERVED_TYPES,
      handler: async ({ message }) => void this.seen.push(message),
    });
  }

  count(jobId: string, type: MessageType): number {
    return this.seen.filter((m) => m.jobId === jobId && m.type === type).length;
  }

  async stop(): Promise<void> {
    await this.subscription?.close();
    await this.consumer?.disconnect();
  }
}
