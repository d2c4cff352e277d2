import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { KafkaBus, partitionFor, Subscription } from '@robustrl/bus';
import { MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { eventually } from '@robustrl/testing/eventually';
import { e2eServiceEnv, ServiceProcess } from './fixtures/service-process';
import { rolloutJobStart, throughputSample } from './fixtures/rollout-job';

jest.setTimeout(180_000);

/**
 * The detector in two shards (docs/contributors/snapshots.md "Sharding the detector") on the real broker and PostgreSQL, each
 * shard its own process (`ROBUSTRL_SHARD=0/2`, `1/2`): jobs on both shards' partitions, each with a
 * rollout that goes silent. Every silent machine is confirmed once, by the shard that owns its job, and
 * a shard neither decides nor holds another's job. (That a shard's lag counts only its own partitions is
 * the bus contract's, `test/contract/bus-contract.ts`.)
 */
describe('the detector in shards (real Kafka, PostgreSQL, processes)', () => {
  const PARTITIONS = 4;
  const brokers = process.env.KAFKA_BROKERS!.split(',');
  const topicPrefix = `e2e-shard-${randomUUID().slice(0, 8)}.`;
  // The partition a job's records are on: Kafka's default partitioner, which the bus's `partitionFor` matches.
  const partitionOf = (jobId: string) => partitionFor(jobId, PARTITIONS);
  const shardOf = (jobId: string) => partitionOf(jobId) % 2;
  /** Three jobs per shard. */
  const jobs: string[] = [];
  for (let i = 0; jobs.filter((j) => shardOf(j) === 0).length < 3 || jobs.filter((j) => shardOf(j) === 1).length < 3; i++) {
    const id = `job-${topicPrefix.slice(10, 18)}-${i}`;
    if (jobs.filter((j) => shardOf(j) === shardOf(id)).length < 3) jobs.push(id);
  }
  let database: { url: string; drop(): Promise<void> };
  let bus: KafkaBus;
  let observer: Subscription;
  const seen: Array<{ partition: number; message: RobustrlMessage }> = [];
  let shards: ServiceProcess[] = [];
  let pg: Client;

  beforeAll(async () => {
    database = await freshDatabaseUrl('robustrl_e2e');
    bus = new KafkaBus({
      brokers,
      clientId: 'e2e-shard',
      topicPrefix,
      partitions: PARTITIONS,
      logger: { info: () => undefined, warn: () => undefined, error: console.error },
    });
    await bus.ensureTopics();
    observer = await bus.subscribe({
      groupId: `e2e-shard-observer-${randomUUID()}`,
      topics: [Topics.verdicts, Topics.membership],
      handler: async (d) => void seen.push({ partition: d.partition, message: d.message }),
    });
    const env = e2eServiceEnv(brokers, database.url, topicPrefix);
    shards = [0, 1].map((i) => new ServiceProcess('detector', { ...env, ROBUSTRL_SHARD: `${i}/2` }));
    for (const s of shards) s.start();
    await eventually('both shards ready', () => (shards.every((s) => s.ready()) ? true : undefined), 90_000);
    pg = new Client({ connectionString: database.url });
    await pg.connect();
  }, 120_000);

  afterAll(async () => {
    for (const s of shards) await s.kill('SIGTERM');
    await pg?.end();
    await observer?.close();
    await bus?.close();
    await database?.drop();
  });

  it('confirms each silent machine once, in the shard that owns its job, and no shard holds another shard’s job', async () => {
    const rollouts = ['r0', 'r1', 'r2'];
    for (const jobId of jobs) {
      const [started, registrations] = rolloutJobStart(jobId, rollouts, { rolloutSilentWindowSeconds: 4, probeTimeoutSeconds: 2, resumeGraceSeconds: 1 });
      await bus.publish(started);
      await bus.publish(registrations);
    }
    let reporting = true;
    let live = rollouts;
    const reporter = (async () => {
      while (reporting) {
        await bus.publish(jobs.flatMap((j) => live.map((id) => throughputSample(j, id))));
        await sleep(500);
      }
    })();
    try {
      await sleep(3_000);
      live = ['r0', 'r1']; // r2 of every job goes silent
      await eventually('r2 confirmed in every job', () => (jobs.every((j) => confirmed(j).length > 0) ? true : undefined), 60_000);
      await sleep(3_000); // time for a second confirmation, were there one
    } finally {
      reporting = false;
      await reporter;
    }

    // The records are where the test computed them: both shards have jobs.
    for (const jobId of jobs) expect(seen.find((s) => s.message.jobId === jobId && s.message.type === 'JobStarted')?.partition).toBe(partitionOf(jobId));
    expect(new Set(jobs.map(shardOf))).toEqual(new Set([0, 1]));
    for (const jobId of jobs) {
      expect(confirmed(jobId).map((m) => (m.data as { machineId: string }).machineId)).toEqual(['r2']);
      expect(confirmed(jobId)[0].source).toBe('detector');
      // Nothing else suspected: a shard's windows see every sample of its jobs.
      expect(ofType(jobId, 'FaultSuspected').map((m) => (m.data as { machineId: string }).machineId)).toEqual(['r2']);
    }
    // Each shard's snapshots hold exactly its jobs; each decided on its own partitions only.
    for (const i of [0, 1]) {
      const name = `detector.shard-${i}-of-2`;
      const { rows } = await pg.query<{ job_id: string }>(`SELECT job_id FROM robustrl_job_snapshots WHERE consumer = $1`, [name]);
      expect(rows.map((r) => r.job_id).sort()).toEqual(jobs.filter((j) => shardOf(j) === i).sort());
      const streams = await pg.query<{ stream: string }>(`SELECT stream FROM robustrl_consumer_checkpoints WHERE consumer = $1`, [name]);
      expect(streams.rows.length).toBeGreaterThan(0);
      expect(streams.rows.every((r) => Number(r.stream.split('/').pop()) % 2 === i)).toBe(true);
    }
    const unsharded = await pg.query(`SELECT 1 FROM robustrl_consumer_checkpoints WHERE consumer = 'detector'`);
    expect(unsharded.rowCount).toBe(0);
  });

  const ofType = (jobId: string, type: MessageType) => seen.filter((s) => s.message.jobId === jobId && s.message.type === type).map((s) => s.message);
  const confirmed = (jobId: string) => ofType(jobId, 'FaultConfirmed');
});
