/**
 * A bare relay hop for `bench:recovery-latency`: a process that consumes one topic and produces every
 * record, as it came (key, value, headers), to another — kafkajs only, nothing of robustrl on the way,
 * clients configured as the bus's (idempotent producer, one request in flight, acks=all; a consumer
 * polling as the bus's subscriptions do). Two of them in a row give the recovery path's floor: the
 * same three broker crossings and two extra processes as signal → detector → controller → observer,
 * with no deciding, no store and no outbox.
 *
 *   node bench/dist/bare-relay.js <brokers> <from-topic> <to-topic>
 *
 * Prints `ready` on stdout once its consumer joined its group; stops on SIGTERM/SIGINT.
 */
import { randomUUID } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';

async function main(): Promise<void> {
  const [brokers, from, to] = process.argv.slice(2);
  if (!brokers || !from || !to) throw new Error('usage: node bench/dist/bare-relay.js <brokers> <from-topic> <to-topic>');
  const kafka = new Kafka({ brokers: brokers.split(','), clientId: 'bench-bare-relay', logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
  const consumer = kafka.consumer({ groupId: `bench-bare-relay-${randomUUID()}`, maxWaitTimeInMs: 1_000 });
  const stop = () => {
    void Promise.allSettled([consumer.disconnect(), producer.disconnect()]).finally(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  await producer.connect();
  await consumer.connect();
  consumer.on(consumer.events.GROUP_JOIN, () => process.stdout.write('ready\n'));
  // The bench creates the topic fresh: from its beginning, so no record sent right after `ready` is skipped.
  await consumer.subscribe({ topic: from, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ message }) => {
      await producer.send({ topic: to, acks: -1, messages: [{ key: message.key, value: message.value, headers: message.headers }] });
    },
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`bare relay: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
