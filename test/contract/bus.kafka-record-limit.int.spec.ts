import { randomUUID } from 'node:crypto';
import { DEAD_LETTER_TOPIC, RobustrlMessage, Topics, createMessage } from '@robustrl/contracts';
import { fromDeadLetterRecord, KafkaBus } from '@robustrl/bus';
import { eventually } from '@robustrl/testing/eventually';
import { KafkaTopicReader } from '@robustrl/testing/kafka-topic-reader';

/**
 * The broker's own limit, not only ours: a bus configured to accept more than the broker
 * (`maxRecordBytes` above `message.max.bytes`, 1 MiB on the local broker) sees the broker refuse the
 * dead-letter copy of a record at that limit (MESSAGE_TOO_LARGE); the dead letter goes out as a
 * reference and the partition moves on — the consumer does not crash.
 */
describe('Kafka: a dead letter the broker refuses as too large', () => {
  const brokers = process.env.KAFKA_BROKERS!.split(',');
  const topicPrefix = `test-${randomUUID()}.`;
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
  const bus = new KafkaBus({ brokers, clientId: 'record-limit-test', topicPrefix, logger: quiet, maxRecordBytes: 4 * 1024 * 1024 });
  let dlq: KafkaTopicReader;

  beforeAll(async () => {
    await bus.ensureTopics();
    dlq = await new KafkaTopicReader(brokers, topicPrefix + DEAD_LETTER_TOPIC).start();
  });
  afterAll(async () => {
    await dlq.stop();
    await bus.close();
  });

  it('is written as a reference, and the next record is handled', async () => {
    const jobId = `job-${randomUUID()}`;
    // Just under the broker's 1 MiB (message.max.bytes 1,048,588 with the batch framing): accepted as a
    // record; its copy with the dead-letter headers is not.
    const big = Buffer.alloc(1_048_400, 'y');
    await bus.publishRaw({ topic: Topics.training, key: jobId, value: big });
    await bus.publish(
      createMessage('TrainingStepCompleted', { step: 1, batchId: 'b1', durationMs: 1 }, { jobId, source: 'test', occurredAt: new Date().toISOString() }),
    );

    const handled: RobustrlMessage[] = [];
    const sub = await bus.subscribe({ groupId: `limit-${randomUUID()}`, topics: [Topics.training], handler: async (d) => void handled.push(d.message) });
    try {
      await eventually('the record after the oversized one', () => (handled.length === 1 ? true : undefined), 30_000);
      const dl = await eventually('the dead-letter reference', () => dlq.records.map(fromDeadLetterRecord).find((d) => d.key === jobId), 30_000);
      expect(dl).toMatchObject({ reference: true, originalSizeBytes: big.length, originalTopic: Topics.training });
      expect(dlq.records.map(fromDeadLetterRecord).filter((d) => d.key === jobId)).toHaveLength(1);
    } finally {
      await sub.close();
    }
  });
});
