import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { KafkaBus, Subscription } from '@robustrl/bus';
import { DataOf, MessageOf, MessageType, RobustrlMessage, Topics } from '@robustrl/contracts';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { eventually } from '@robustrl/testing/eventually';
import { e2eServiceEnv, ServiceProcess } from './fixtures/service-process';
import { e2eMessage, rolloutJobStart, throughputSample } from './fixtures/rollout-job';

jest.setTimeout(180_000);

/**
 * Snapshots and restart on the real broker and PostgreSQL, with the real detector and controller as
 * their own processes (docs/contributors/snapshots.md): a detector killed with kill -9 comes back from
 * its snapshot and the records after it — windows exactly where they were, no verdict or command twice,
 * and a start that reads the same few rows however many samples came before.
 */
describe('snapshots and restart (real Kafka, PostgreSQL, processes)', () => {
  const brokers = process.env.KAFKA_BROKERS!.split(',');
  const topicPrefix = `e2e-snap-${randomUUID().slice(0, 8)}.`;
  let database: { url: string; drop(): Promise<void> };
  let bus: KafkaBus;
  let observer: Subscription;
  /** Everything seen on the output topics, with when it arrived. */
  const seen: Array<{ at: number; message: RobustrlMessage }> = [];
  let detector: ServiceProcess;
  let controller: ServiceProcess;
  let pg: Client;
  /** Whether a service has written a snapshot of the job (it consumed the job's facts). */
  const snapshotOf = async (consumer: string, jobId: string) =>
    (await pg.query(`SELECT 1 FROM robustrl_job_snapshots WHERE consumer = $1 AND job_id = $2`, [consumer, jobId]).catch(() => ({ rowCount: 0 }))).rowCount
      ? true
      : undefined;

  const ofType = <T extends MessageType>(jobId: string, type: T) =>
    seen.filter((s) => s.message.jobId === jobId && s.message.type === type) as Array<{ at: number; message: MessageOf<T> }>;
  const msg = e2eMessage;
  const throughput = throughputSample;
  async function startJob(jobId: string, rollouts: string[], detection: DataOf<'JobStarted'>['detection']) {
    const [started, registrations] = rolloutJobStart(jobId, rollouts, detection);
    await bus.publish(started);
    await bus.publish(registrations);
  }

  beforeAll(async () => {
    database = await freshDatabaseUrl('robustrl_e2e');
    bus = new KafkaBus({ brokers, clientId: 'e2e-snap', topicPrefix, logger: { info: () => undefined, warn: () => undefined, error: console.error } });
    await bus.ensureTopics();
    observer = await bus.subscribe({
      groupId: `e2e-snap-observer-${randomUUID()}`,
      topics: [Topics.verdicts, Topics.heartbeat, Topics.control],
      handler: async (d) => void seen.push({ at: Date.now(), message: d.message }),
    });
    const env = { ...e2eServiceEnv(brokers, database.url, topicPrefix), ROBUSTRL_ORCHESTRATOR: 'none' };
    detector = new ServiceProcess('detector', env);
    controller = new ServiceProcess('controller', env);
    detector.start();
    controller.start();
    await eventually('detector and controller ready', () => (detector.ready() && controller.ready() ? true : undefined), 90_000);
    pg = new Client({ connectionString: database.url });
    await pg.connect();
  }, 120_000);

  afterAll(async () => {
    await detector?.kill('SIGTERM');
    await controller?.kill('SIGTERM');
    await pg?.end();
    await observer?.close();
    await bus?.close();
    await database?.drop();
  });

  it('a detector killed while a machine is silent confirms it on time after the restart: its window neither reset nor stretched', async () => {
    const jobId = `job-window-${randomUUID().slice(0, 8)}`;
    const WINDOW_S = 12;
    const GRACE_S = 2;
    await startJob(jobId, ['r0', 'r1', 'r2'], { rolloutSilentWindowSeconds: WINDOW_S, probeTimeoutSeconds: 2, resumeGraceSeconds: GRACE_S });
    let live = ['r0', 'r1', 'r2'];
    let reporting = true;
    let lastOfR2 = 0;
    const reporter = (async () => {
      while (reporting) {
        await bus.publish(live.map((id) => throughput(jobId, id)));
        if (live.includes('r2')) lastOfR2 = Date.now();
        await sleep(500);
      }
    })();
    try {
      await sleep(4_000);
      live = ['r0', 'r1']; // r2 dies silently
      await sleep(600);
      const silentSince = lastOfR2;
      // 9 s into its 12 s window: a detector that reset the window on restart would wait ~12 s more.
      await sleep(9_000 - (Date.now() - silentSince));
      await detector.kill('SIGKILL');
      detector.start();
      const suspected = await eventually('r2 suspected', () => ofType(jobId, 'FaultSuspected').find((s) => s.message.data.machineId === 'r2'), 60_000);
      await eventually('r2 confirmed', () => ofType(jobId, 'FaultConfirmed').find((s) => s.message.data.machineId === 'r2'), 30_000);
      await sleep(2_000);

      // The restart is the only blind time: DetectionResumed says how long.
      const resumed = ofType(jobId, 'DetectionResumed');
      expect(resumed).toHaveLength(1);
      const blindMs = resumed[0].message.data.blindMs;
      const silentS = (suspected.at - silentSince) / 1000;
      process.stdout.write(`r2 suspected ${silentS.toFixed(1)} s after its last report; the restart blinded the detector for ${blindMs} ms\n`);
      // Not early: the full window of silence, the blind interval not counted as silence…
      expect(silentS).toBeGreaterThanOrEqual(WINDOW_S + blindMs / 1000 - 1);
      // …and not late: no window started over at the restart (that would be ≥ 9 + restart + 12 s).
      expect(silentS).toBeLessThanOrEqual(WINDOW_S + blindMs / 1000 + GRACE_S + 2.5);
      expect(silentS).toBeLessThan(9 + blindMs / 1000 + WINDOW_S);
      // Its evidence starts at its last report, as before the restart.
      expect(Date.parse(suspected.message.data.evidence.faultEvidenceSince!)).toBeGreaterThanOrEqual(silentSince - 1_500);
      // Once each, and nobody else.
      expect(ofType(jobId, 'FaultSuspected').map((s) => s.message.data.machineId)).toEqual(['r2']);
      expect(ofType(jobId, 'FaultConfirmed').map((s) => s.message.data.machineId)).toEqual(['r2']);
      // The start read its snapshot, not the job's history.
      expect(detector.loaded().snapshotRows).toBeGreaterThanOrEqual(1);
    } finally {
      reporting = false;
      await reporter;
    }
  });

  it('kill -9 of the detector and the controller in the middle of a backlog: no verdict and no command twice, and a start that reads a few rows', async () => {
    const jobId = `job-flood-${randomUUID().slice(0, 8)}`;
    const machines = Array.from({ length: 40 }, (_, i) => `m${i}`);
    await startJob(jobId, machines, { rolloutSilentWindowSeconds: 600, probeTimeoutSeconds: 60 });
    await eventually('the detector holding the job in a snapshot', async () => ((await snapshotOf('detector', jobId)) ? true : undefined), 60_000);
    // While both are down, a backlog: 96,000 samples on the telemetry topic and, on the heartbeat topic
    // (where fault signals travel), 24,000 facts no rule acts on with a fault of 12 machines spread over them.
    await Promise.all([detector.kill('SIGTERM'), controller.kill('SIGTERM')]);
    const faulty = machines.slice(0, 12);
    const BEACONS = 24_000;
    for (let round = 0; round < 2_400; round++) {
      const batch: RobustrlMessage[] = machines.map((id) => throughput(jobId, id));
      for (let b = 0; b < BEACONS / 2_400; b++) {
        batch.push(msg(jobId, 'HeartbeatAcked', { probeId: `beacon/${randomUUID()}`, machineId: 'e2e-beacon', ackedAt: new Date().toISOString() }));
      }
      if (round % 200 === 100) {
        const id = faulty[(round - 100) / 200];
        batch.push(
          msg(jobId, 'AgentFaultSignalled', {
            machineId: id,
            role: 'rollout',
            signal: 'process-exited',
            detail: 'engine exited 1',
            exitCode: 1,
            observedAt: new Date().toISOString(),
          }),
        );
      }
      await bus.publish(batch);
    }
    // They work through it in batches: when the detector has decided about 40% of the heartbeat backlog, kill both.
    const decidedOn = async (topic: string) =>
      Number(
        (
          await pg
            .query(`SELECT coalesce(sum(position + 1), 0)::text AS n FROM robustrl_consumer_checkpoints WHERE consumer = 'detector' AND stream LIKE $1`, [
              `${topic}/%`,
            ])
            .catch(() => ({ rows: [{ n: '0' }] }))
        ).rows[0].n,
      );
    const before = await decidedOn(Topics.heartbeat);
    detector.start();
    controller.start();
    let atKill = 0;
    await eventually(
      'the detector 40% through the heartbeat backlog',
      async () => {
        atKill = (await decidedOn(Topics.heartbeat)) - before;
        return atKill >= 0.4 * BEACONS ? true : undefined;
      },
      60_000,
    );
    await Promise.all([detector.kill('SIGKILL'), controller.kill('SIGKILL')]);
    const confirmedBeforeKill = new Set(ofType(jobId, 'FaultConfirmed').map((s) => s.message.data.machineId)).size;
    process.stdout.write(`killed ${Math.round((100 * atKill) / BEACONS)}% through the backlog, ${confirmedBeforeKill} of ${faulty.length} faults confirmed\n`);
    // In the middle of it: records and faults were still to be decided.
    expect(atKill).toBeLessThan(0.9 * BEACONS);
    expect(confirmedBeforeKill).toBeLessThan(faulty.length);
    detector.start();
    controller.start();
    await eventually(
      'every fault confirmed',
      () => (new Set(ofType(jobId, 'FaultConfirmed').map((s) => s.message.data.machineId)).size === faulty.length ? true : undefined),
      90_000,
    );
    await eventually('both ready again', () => (detector.ready() && controller.ready() ? true : undefined), 60_000);
    await eventually('the backlog decided', async () => ((await decidedOn(Topics.heartbeat)) - before >= BEACONS + faulty.length ? true : undefined), 60_000);
    await sleep(3_000);

    // One event per verdict (a republished one carries the same id: consumers de-duplicate those).
    const verdicts = ofType(jobId, 'FaultConfirmed');
    const idsByVerdict = new Map<string, Set<string>>();
    for (const { message } of verdicts) idsByVerdict.set(message.data.verdictId, (idsByVerdict.get(message.data.verdictId) ?? new Set()).add(message.eventId));
    expect([...idsByVerdict.values()].map((ids) => ids.size)).toEqual(faulty.map(() => 1));
    expect(new Set(verdicts.map((s) => s.message.data.machineId))).toEqual(new Set(faulty));
    // One decision and one command per verdict.
    const decided = ofType(jobId, 'RecoveryDecided');
    const byCause = new Map<string, Set<string>>();
    for (const { message } of decided) byCause.set(message.causationId!, (byCause.get(message.causationId!) ?? new Set()).add(message.eventId));
    expect([...byCause.values()].every((ids) => ids.size === 1)).toBe(true);
    const commands = seen.filter(
      (s) =>
        s.message.jobId === jobId &&
        ['ReplaceMachine', 'RestartRolloutEngine', 'RestartTask', 'RestartTrainerGroup', 'PromoteRolloutToTrainer'].includes(s.message.type),
    );
    const commandIds = new Map<string, Set<string>>();
    for (const { message } of commands) {
      const key = `${message.type}/${message.correlationId}/${JSON.stringify(message.data)}`;
      commandIds.set(key, (commandIds.get(key) ?? new Set()).add(message.eventId));
    }
    expect(commands.length).toBeGreaterThan(0);
    expect([...commandIds.values()].every((ids) => ids.size === 1)).toBe(true);

    // Killed again once it has taken all of it (and snapshotted, every second here): the start reads a
    // snapshot row per job and the facts after it — not the 96,000 samples nor the 24,000 facts before.
    await detector.kill('SIGKILL');
    detector.start();
    await eventually('the detector ready again', () => (detector.ready() ? true : undefined), 60_000);
    const rows = detector.loaded();
    process.stdout.write(`restart after the backlog read ${rows.snapshotRows} job snapshot(s) and ${rows.inboxRows} inbox row(s)\n`);
    expect(rows.snapshotRows).toBeGreaterThanOrEqual(1);
    expect(rows.snapshotRows + rows.inboxRows).toBeLessThan(100);
  });
});
