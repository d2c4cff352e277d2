import { Consumer, Kafka, logLevel } from 'kafkajs';
import { randomUUID } from 'node:crypto';
import { InboundRecord } from '@robustrl/bus';

/** Reads a topic from the beginning with kafkajs directly (no robustrl code), for assertions. */
export class KafkaTopicReader {
  readonly records: InboundRecord[] = [];
  private consumer?: Consumer;

  constructor(
    private readonly brokers: string[],
    private readonly topic: string,
  ) {}

  async start(): Promise<this> {
    const kafka = new Kafka({ brokers: this.brokers, clientId: 'test-reader', logLevel: logLevel.NOTHING });
    this.consumer = kafka.consumer({ groupId: `test-reader-${randomUUID()}` });
    await this.consumer.connect();
    await this.consumer.subscribe({ topic: this.topic, fromBeginning: true });
    await this.consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message }) => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(message.headers ?? {})) if (v !== undefined) headers[k] = String(Array.isArray(v) ? v[0] : v);
        this.records.push({ topic, partition, offset: message.offset, key: message.key?.toString() ?? null, value: message.value, headers });
      },
    });
    return this;
  }

  async stop(): Promise<void> {
    await this.consumer?.disconnect();
  }
}
