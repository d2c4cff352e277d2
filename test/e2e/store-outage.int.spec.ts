import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMessage, DEAD_LETTER_TOPIC, Topics } from '@robustrl/contracts';
import { DETECTOR_INPUT_TYPES, DetectorDecider } from '@robustrl/detector-domain';
import { fromDeadLetterRecord, KafkaBus } from '@robustrl/bus';
import { DecidingConsumer } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { eventually } from '@robustrl/testing/eventually';
import { KafkaTopicReader } from '@robustrl/testing/kafka-topic-reader';
import { freePort } from '@robustrl/harness';

const POSTGRES = join(__dirname, '..', '..', 'deploy', 'local', 'postgres.sh');

/**
 * A PostgreSQL outage under steady load (item 2): a deciding service (the detector's shell
 * around the real detector) on the real broker, its store a PostgreSQL server of the test's own that is
 * stopped for 20 s while telemetry keeps arriving and then started again. Nothing may be lost or
 * dead-lettered: every published sample ends up applied (in the consumer's inbox), once.
 */
describe('store outage under steady load (real Kafka, a real PostgreSQL server stopped and restarted)', () => {
  const brokers = process.env.KAFKA_BROKERS!.split(',');
  const topicPrefix = `test-${randomUUID()}.`;
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
  let localDir: string;
  let env: NodeJS.ProcessEnv;
  const postgres = (command: 'start' | 'stop' | 'env') =>
    execFileSync('bash', [POSTGRES, command], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

  beforeAll(async () => {
    localDir = mkdtempSync(join(tmpdir(), 'robustrl-outage-'));
    env = { ...process.env, ROBUSTRL_LOCAL_DIR: localDir, PGPORT_LOCAL: String(await freePort()) };
    postgres('start');
  });
  afterAll(() => {
    try {
      postgres('stop');
    } finally {
      rmSync(localDir, { recursive: true, force: true });
    }
  });

  it('applies every fact published before, during and after a 20 s outage (samples beside them); dead-letters none', async () => {
    const url = /^DATABASE_URL=(.*)$/m.exec(postgres('env'))![1].trim();
    const store = await EventStore.open({ kind: 'postgres', url });
    const bus = new KafkaBus({ brokers, clientId: 'outage-test', topicPrefix, logger: quiet });
    await bus.ensureTopics();
    const dlq = await new KafkaTopicReader(brokers, topicPrefix + DEAD_LETTER_TOPIC).start();
    const consumer = new DecidingConsumer(bus, store, {
      consumer: 'detector',
      topics: [Topics.membership, Topics.telemetry, Topics.heartbeat],
      inputTypes: DETECTOR_INPUT_TYPES,
      decider: DetectorDecider,
      tickIntervalMs: null,
    });
    const jobId = `job-${randomUUID()}`;
    const sample = (i: number) =>
      createMessage(
        'GpuActivitySampled',
        { machineId: 'trainer-0', sampledAt: new Date().toISOString(), intervalSeconds: 1, tensorActive: 0.5 + (i % 10) / 100, source: 'emulated' },
        { jobId, source: 'outage-test', occurredAt: new Date().toISOString() },
      );
    const published: string[] = [];
    const publishFor = async (ms: number) => {
      const end = Date.now() + ms;
      while (Date.now() < end) {
        // Samples are kept nowhere (docs/contributors/snapshots.md "Telemetry is not a fact"): the fact beside each one is what is checked.
        const beacon = createMessage(
          'HeartbeatAcked',
          { probeId: `beacon/${randomUUID()}`, machineId: 'outage-beacon', ackedAt: new Date().toISOString() },
          { jobId, source: 'outage-test', occurredAt: new Date().toISOString() },
        );
        await bus.publish([sample(published.length), beacon]);
        published.push(beacon.eventId);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    try {
      await consumer.start();
      await publishFor(3_000);
      postgres('stop');
      await publishFor(20_000);
      postgres('start');
      await publishFor(3_000);

      const applied = await eventually(
        `all ${published.length} facts applied`,
        async () => {
          const ids = new Set((await store.inbox.read(store.dataSource.manager, 'detector', '0', 100_000)).map((r) => r.message.eventId));
          return published.every((id) => ids.has(id)) ? ids : undefined;
        },
        60_000,
      );
      expect(published.filter((id) => !applied.has(id))).toEqual([]);
      expect(applied.size).toBe(published.length);
      expect(dlq.records.map(fromDeadLetterRecord).filter((d) => d.key === jobId)).toEqual([]);
    } finally {
      await consumer.stop();
      await dlq.stop();
      await bus.close();
      await store.close();
    }
  }, 120_000);
});
