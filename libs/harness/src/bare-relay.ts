/**
 * A bare relay hop for `bench:recovery-latency`: a process that consumes one topic and produces every
 * record, as it came (key, value, headers), to another — kafkajs only, nothing of robustrl on the way,
 * clients configured as the bus's (idempotent producer, one request in flight, acks=all; a consumer
 * polling as the bus's subscriptions do). Two of them in a row give the recovery path's floor: the
 * same three broker crossings and two extra processes as signal → detector → controller → observer,
 * with no deciding, no store and no outbox.
 *
 * With a PostgreSQL URL it is a *durable* relay: before producing a record it commits one row for it
 * (one statement, prepared, keyed by the record's topic/partition/offset, `ON CONFLICT DO NOTHING`) —
 * the least any hop must do that may neither lose an output on a crash nor emit it twice for one cause
 * (robustrl's deciding services commit checkpoint, inbox, event log and outbox in one such statement
 * before publishing). One durable relay between two crossings is the floor of a design with a single
 * deciding service on the recovery path, which is what the goal's "two round trips" allows for.
 *
 *   node libs/harness/dist/bare-relay.js <brokers> <from-topic> <to-topic> [<postgres-url>]
 *
 * Prints `ready` on stdout once its consumer joined its group; stops on SIGTERM/SIGINT.
 */
import { randomUUID } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { Client } from 'pg';
import { DURABLE_RELAY_TABLE as DURABLE_TABLE } from './bare-relay-table';

async function main(): Promise<void> {
  const [brokers, from, to, databaseUrl] = process.argv.slice(2);
  if (!brokers || !from || !to) throw new Error('usage: node libs/harness/dist/bare-relay.js <brokers> <from-topic> <to-topic> [<postgres-url>]');
  const kafka = new Kafka({ brokers: brokers.split(','), clientId: 'bench-bare-relay', logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
  const consumer = kafka.consumer({ groupId: `bench-bare-relay-${randomUUID()}`, maxWaitTimeInMs: 1_000 });
  const db = databaseUrl ? new Client({ connectionString: databaseUrl }) : null;
  const stop = () => {
    void Promise.allSettled([consumer.disconnect(), producer.disconnect(), db?.end()]).finally(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  if (db) {
    await db.connect();
    await db.query(`CREATE TABLE IF NOT EXISTS ${DURABLE_TABLE} (id text PRIMARY KEY, record bytea NOT NULL, relayed_at timestamptz NOT NULL DEFAULT now())`);
  }
  await producer.connect();
  await consumer.connect();
  consumer.on(consumer.events.GROUP_JOIN, () => process.stdout.write('ready\n'));
  // The bench creates the topic fresh: from its beginning, so no record sent right after `ready` is skipped.
  await consumer.subscribe({ topic: from, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ topic, partition, message }) => {
      if (db && message.value) {
        await db.query({
          name: 'bench-durable-relay-insert',
          text: `INSERT INTO ${DURABLE_TABLE} (id, record) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
          values: [`${topic}/${partition}/${message.offset}`, message.value],
        });
      }
      await producer.send({ topic: to, acks: -1, messages: [{ key: message.key, value: message.value, headers: message.headers }] });
    },
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`bare relay: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
