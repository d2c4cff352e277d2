import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { BusLogger, KafkaBus } from '@robustrl/bus';
import { ALL_TOPICS, createMessage, encodeMessage, Topics } from '@robustrl/contracts';
import { agentAfterOldCommands } from './infra-agent-scenario';
import { InfraChaosOptions } from './infra-chaos-options';
import { Observer } from './infra-observer';
import { check, fmt, RestartMeasure, ScenarioResult, Scorecard } from './infra-scorecard';
import { Database } from './infra-store-reader';
import { sleep, waitFor } from './infra-wait';
import { freePort, PrivateInfra, ServiceProcess } from './private-infra';
import { SyntheticJob } from './synthetic-job';

export { DEFAULT_CHAOS_OPTIONS, InfraChaosOptions } from './infra-chaos-options';
export { Check, formatScorecard, RestartMeasure, ScenarioResult, Scorecard } from './infra-scorecard';

/**
 * The infrastructure fault-injection campaign (`npm run chaos:infra`, and with the stated
 * durations in `test/e2e/infra-chaos.int.spec.ts`): a real broker and PostgreSQL server of its own, the
 * detector, controller and rollout manager as their own processes, and a healthy synthetic job sending
 * telemetry throughout. Faults of the control plane's own infrastructure are injected one after the
 * other; the scorecard says, per scenario, what was published, handled, dead-lettered and lost, which
 * verdicts came out (every machine is healthy, so every verdict is false), and how restarts went.
 * Beside this file: its settings (infra-chaos-options.ts), the scorecard (infra-scorecard.ts), what it
 * reads of the topics (infra-observer.ts) and of the store (infra-store-reader.ts), and the agent
 * scenario (infra-agent-scenario.ts).
 */
const SERVICES = [
  { name: 'detector', consumer: 'detector' },
  { name: 'controller', consumer: 'controller' },
  { name: 'rollout-manager', consumer: 'rollout-manager' },
] as const;

const quiet: BusLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

export async function runInfraChaos(options: InfraChaosOptions): Promise<Scorecard> {
  const { progress } = options;
  const infra = await PrivateInfra.create();
  const logDir = join(infra.dir, 'logs');
  mkdirSync(logDir, { recursive: true });
  progress(`private broker and PostgreSQL in ${infra.dir} (service logs in ${logDir})`);
  infra.startKafka();
  infra.startPostgres();
  const topicPrefix = `chaos-${randomUUID().slice(0, 8)}.`;
  const env: NodeJS.ProcessEnv = {
    KAFKA_BROKERS: infra.brokers.join(','),
    DATABASE_URL: infra.databaseUrl,
    ROBUSTRL_TOPIC_PREFIX: topicPrefix,
    ROBUSTRL_ORCHESTRATOR: 'none',
    OTEL_SDK_DISABLED: 'true',
  };
  const services = new Map<string, ServiceProcess>();
  for (const s of SERVICES) services.set(s.name, new ServiceProcess(s.name, await freePort(), env, logDir));
  const bus = new KafkaBus({ brokers: infra.brokers, clientId: 'chaos-agents', topicPrefix, logger: quiet, maxRecordBytes: 4 * 1024 * 1024 });
  const observer = new Observer(infra.brokers, topicPrefix, bus);
  const db = new Database(infra.databaseUrl);
  const job = new SyntheticJob(
    bus,
    { trainers: options.trainers, rollouts: options.rollouts },
    {
      // Short windows, so a false verdict would show within the outages; longer than the detector's lag tolerance (10 s).
      trainerIdleWindowSeconds: 30,
      rolloutSilentWindowSeconds: 20,
      probeTimeoutSeconds: 5,
      resumeGraceSeconds: 10,
    },
  );
  const scenarios: ScenarioResult[] = [];
  const restarts: RestartMeasure[] = [];
  const scenarioOf = new Map<string, string>();
  try {
    await bus.ensureTopics();
    for (const s of services.values()) s.start();
    for (const s of services.values()) await waitFor(`${s.name} ready`, async () => (await s.readiness()) === 200, 90_000);
    await observer.start();
    await job.begin();
    job.run(1_000);
    progress(`job ${job.jobId}: ${options.trainers} trainers and ${options.rollouts} rollouts reporting every second`);

    let handledSet = new Set<string>();
    const refresh = async () => void (handledSet = await db.handledIds(job.jobId));
    const scenario = async (name: string, body: (r: ScenarioResult) => Promise<void>) => {
      progress(`scenario: ${name}`);
      // Each fault hits a settled system: every service ready (after a broker outage a consumer may still be in its restart backoff).
      const settling = Date.now();
      const settled = await waitFor(
        'every service ready',
        async () => (await Promise.all([...services.values()].map((s) => s.readiness()))).every((code) => code === 200),
        120_000,
      ).catch(() => false);
      if (!settled) progress('  (not every service was ready within 120 s; the scenario runs anyway)');
      else if (Date.now() - settling > 1_000) progress(`  (waited ${Math.round((Date.now() - settling) / 1000)} s for every service to be ready)`);
      const started = Date.now();
      const before = {
        dl: observer.deadLetters.length,
        verdicts: observer.count(job.jobId, 'FaultConfirmed'),
        suspicions: observer.count(job.jobId, 'FaultSuspected'),
      };
      const result: ScenarioResult = {
        name,
        seconds: 0,
        published: 0,
        handled: 0,
        lost: 0,
        deadLettered: 0,
        verdicts: 0,
        suspicions: 0,
        checks: [],
        notes: [],
      };
      if (!settled) result.checks.push({ what: 'every service ready before the fault', ok: false, detail: 'not within 120 s' });
      await body(result);
      for (const id of job.published) if (!scenarioOf.has(id)) scenarioOf.set(id, name);
      result.seconds = Math.round((Date.now() - started) / 1000);
      result.deadLettered = observer.deadLetters.length - before.dl;
      result.verdicts = observer.count(job.jobId, 'FaultConfirmed') - before.verdicts;
      result.suspicions = observer.count(job.jobId, 'FaultSuspected') - before.suspicions;
      scenarios.push(result);
      for (const c of result.checks) progress(`  ${c.ok ? 'ok  ' : 'FAIL'} ${c.what}: ${c.detail}`);
    };
    /** Until the detector applied everything published so far (the load goes on meanwhile). */
    const caughtUp = async (what: string, timeoutMs: number) => {
      const start = Date.now();
      const target = [...job.published];
      const ok = await waitFor(
        what,
        async () => {
          await refresh();
          return target.every((id) => handledSet.has(id));
        },
        timeoutMs,
      ).catch(() => false);
      return { ok, ms: Date.now() - start };
    };

    await scenario('steady load', async (r) => {
      await sleep(10_000);
      const c = await caughtUp('steady load applied', 30_000);
      check(r, 'every sample applied', c.ok, c.ok ? 'all applied' : 'some not applied within 30 s');
    });

    await scenario('oversized record at the broker limit', async (r) => {
      const dlBefore = observer.deadLetters.length;
      // Keyed by the job: the record sits in the job's own telemetry partition, ahead of its samples.
      await bus.publishRaw({ topic: Topics.telemetry, key: job.jobId, value: Buffer.alloc(1_048_400, 'x') });
      const c = await caughtUp('samples after the oversized record applied', 60_000);
      check(r, 'the records after it handled', c.ok, c.ok ? `caught up in ${c.ms} ms` : 'the partition did not move on');
      await sleep(5_000); // every group reading telemetry has passed it
      const refs = observer.deadLetters.slice(dlBefore).filter((d) => d.reference);
      check(r, 'one dead-letter reference', refs.length === 1, `${refs.length} reference(s), ${observer.deadLetters.length - dlBefore} dead letter(s)`);
    });

    await scenario('malformed records on every topic', async (r) => {
      const dlBefore = observer.deadLetters.length;
      const misplaced = createMessage('FaultConfirmed', fakeVerdict(), { jobId: job.jobId, source: 'chaos', occurredAt: new Date().toISOString() });
      const bad: Array<{ topic: string; value: Buffer }> = [
        ...ALL_TOPICS.map((topic) => ({ topic, value: Buffer.from(`not json on ${topic}`) })),
        { topic: Topics.telemetry, value: Buffer.from(JSON.stringify({ type: 'GpuActivitySampled', data: { machineId: 7 } })) },
        { topic: Topics.telemetry, value: Buffer.from(encodeMessage(misplaced)) },
      ];
      for (const b of bad) await bus.publishRaw({ topic: b.topic, key: job.jobId, value: b.value });
      const c = await caughtUp('samples after the malformed records applied', 60_000);
      check(r, 'the records after them handled', c.ok, c.ok ? `caught up in ${c.ms} ms` : 'a partition did not move on');
      await sleep(5_000);
      const copies = observer.deadLetters.length - dlBefore;
      check(r, 'one dead letter per bad record', copies === bad.length, `${bad.length} bad records, ${copies} dead letters`);
    });

    await scenario(`PostgreSQL down ${options.storeOutageSeconds} s under load`, async (r) => {
      const dlBefore = observer.deadLetters.length;
      const suspectedBefore = observer.count(job.jobId, 'FaultSuspected');
      infra.stopPostgres();
      await sleep(Math.min(10_000, (options.storeOutageSeconds * 1000) / 2));
      const readyWhileDown = await services.get('detector')!.readiness();
      check(r, '/readyz false while the store is down', readyWhileDown === 503, `detector /readyz ${readyWhileDown}`);
      await sleep(options.storeOutageSeconds * 1000 - Math.min(10_000, (options.storeOutageSeconds * 1000) / 2));
      infra.startPostgres();
      const c = await caughtUp('the backlog applied after the store came back', 120_000);
      check(r, 'processing resumes by itself', c.ok, c.ok ? `caught up ${Math.round(c.ms / 1000)} s after the store came back` : 'not caught up within 120 s');
      check(r, 'nothing dead-lettered', observer.deadLetters.length === dlBefore, `${observer.deadLetters.length - dlBefore} dead letter(s)`);
      // The detector read nothing while the store was down: a suspicion now would be its own outage taken for silence.
      await sleep(5_000);
      const suspicions = observer.count(job.jobId, 'FaultSuspected') - suspectedBefore;
      check(r, 'no suspicion from the outage', suspicions === 0, `${suspicions} FaultSuspected`);
    });

    await scenario(`broker down ${options.brokerOutageSeconds} s`, async (r) => {
      const suspectedBefore = observer.count(job.jobId, 'FaultSuspected');
      infra.stopKafka();
      await sleep(Math.min(15_000, (options.brokerOutageSeconds * 1000) / 2));
      const readyWhileDown = await services.get('detector')!.readiness();
      check(r, '/readyz false while the broker is down', readyWhileDown === 503, `detector /readyz ${readyWhileDown}`);
      await sleep(options.brokerOutageSeconds * 1000 - Math.min(15_000, (options.brokerOutageSeconds * 1000) / 2));
      infra.startKafka();
      const back = Date.now();
      const ready = await waitFor('ready again', async () => (await services.get('detector')!.readiness()) === 200, 60_000).catch(() => false);
      check(r, '/readyz true after', ready, ready ? `after ${Math.round((Date.now() - back) / 1000)} s` : 'not ready within 60 s');
      const c = await caughtUp('telemetry applied after the outage', 120_000);
      check(r, 'processing resumes by itself', c.ok, c.ok ? `caught up ${Math.round(c.ms / 1000)} s after ready` : 'not caught up within 120 s');
      // Past the grace period and a whole rollout window: a false verdict would have come by now.
      await sleep(35_000);
      check(
        r,
        'detection paused and resumed',
        observer.count(job.jobId, 'DetectionResumed') > 0,
        `${observer.count(job.jobId, 'DetectionPaused')} paused, ${observer.count(job.jobId, 'DetectionResumed')} resumed`,
      );
      const suspicions = observer.count(job.jobId, 'FaultSuspected') - suspectedBefore;
      check(r, 'no suspicion from the outage', suspicions === 0, `${suspicions} FaultSuspected`);
    });

    const restart = async (name: string, how: RestartMeasure['how']) => {
      const service = services.get(name)!;
      if (how === 'kill -9') await service.kill9();
      else await service.terminate();
      await sleep(2_000); // the job keeps reporting while it is down
      service.start();
      const since = new Date(service.startedAt);
      const measure: RestartMeasure = { service: name, how, toConsumingMs: null, toReadyMs: null };
      const consumer = SERVICES.find((s) => s.name === name)!.consumer;
      await Promise.all([
        waitFor(`${name} ready`, async () => (await service.readiness()) === 200, 60_000)
          .then(() => (measure.toReadyMs = Date.now() - service.startedAt))
          .catch(() => undefined),
        waitFor(
          `${name} consuming`,
          async () => {
            const first = await db.firstAppliedSince(consumer, since);
            if (first !== null) measure.toConsumingMs = first - service.startedAt;
            return first !== null;
          },
          60_000,
          100,
        ).catch(() => undefined),
      ]);
      restarts.push(measure);
      return measure;
    };

    await scenario('detector killed (kill -9) and restarted', async (r) => {
      const m = await restart('detector', 'kill -9');
      check(
        r,
        `consuming within ${options.restartBudgetMs} ms`,
        m.toConsumingMs !== null && m.toConsumingMs <= options.restartBudgetMs,
        `start → consuming ${fmt(m.toConsumingMs)}, → ready ${fmt(m.toReadyMs)}`,
      );
      const c = await caughtUp('caught up after the restart', 60_000);
      check(r, 'nothing lost across the restart', c.ok, c.ok ? 'all applied' : 'not caught up within 60 s');
    });

    await scenario('detector stopped (SIGTERM) and restarted', async (r) => {
      const m = await restart('detector', 'SIGTERM');
      check(
        r,
        `consuming within ${options.restartBudgetMs} ms`,
        m.toConsumingMs !== null && m.toConsumingMs <= options.restartBudgetMs,
        `start → consuming ${fmt(m.toConsumingMs)}, → ready ${fmt(m.toReadyMs)}`,
      );
    });

    await scenario('detector started while the broker and PostgreSQL are down', async (r) => {
      const detector = services.get('detector')!;
      await detector.kill9();
      infra.stopKafka();
      infra.stopPostgres();
      detector.start();
      await sleep(15_000);
      check(r, 'waits instead of exiting', detector.running, detector.running ? 'still running after 15 s' : 'the process exited');
      infra.startPostgres();
      infra.startKafka();
      const back = Date.now();
      const consuming = await waitFor('the detector consuming', async () => (await db.firstAppliedSince('detector', new Date(back))) !== null, 120_000).catch(
        () => false,
      );
      check(r, 'consumes once they are back', consuming, consuming ? `${Math.round((Date.now() - back) / 1000)} s after they came back` : 'not within 120 s');
      const c = await caughtUp('caught up', 60_000);
      check(r, 'nothing lost', c.ok, c.ok ? 'all applied' : 'not caught up within 60 s');
    });

    await scenario('controller and rollout manager killed (kill -9) and restarted', async (r) => {
      const dlBefore = observer.deadLetters.length;
      for (const name of ['controller', 'rollout-manager']) {
        const m = await restart(name, 'kill -9');
        r.notes.push(`${name}: start → ready ${fmt(m.toReadyMs)}`);
      }
      await sleep(10_000); // their groups (and the controller's fresh read-model group) re-read the topics with bad records
      check(r, 'no dead letter written again', observer.deadLetters.length === dlBefore, `${observer.deadLetters.length - dlBefore} new dead letter(s)`);
    });

    await scenario('an agent started after old commands for its machine', (r) =>
      agentAfterOldCommands(r, { bus, observer, env, logDir, infraDir: infra.dir, jobId: job.jobId }),
    );

    await job.stop();
    await caughtUp('everything applied at the end', 60_000);
    await refresh();
    for (const r of scenarios) {
      const ids = [...scenarioOf].filter(([, s]) => s === r.name).map(([id]) => id);
      r.published = ids.length;
      r.handled = ids.filter((id) => handledSet.has(id)).length;
      r.lost = r.published - r.handled;
      if (r.lost > 0) r.checks.push({ what: 'nothing lost', ok: false, detail: `${r.lost} published fact(s) never applied` });
      if (r.verdicts > 0) r.checks.push({ what: 'no false verdict', ok: false, detail: `${r.verdicts} FaultConfirmed for healthy machines` });
    }
    const copies = new Map<string, number>();
    for (const d of observer.deadLetters)
      copies.set(
        `${d.originalTopic}/${d.originalPartition}/${d.originalOffset}`,
        (copies.get(`${d.originalTopic}/${d.originalPartition}/${d.originalOffset}`) ?? 0) + 1,
      );
    const duplicateDeadLetters = [...copies.values()].reduce((n, c) => n + c - 1, 0);
    for (const s of services.values()) {
      if (!s.running) scenarios[scenarios.length - 1].checks.push({ what: `${s.name} still running`, ok: false, detail: 'the process exited' });
    }
    const ok = duplicateDeadLetters === 0 && scenarios.every((r) => r.checks.every((c) => c.ok));
    return { jobId: job.jobId, scenarios, restarts, duplicateDeadLetters, ok };
  } finally {
    await job.stop().catch(() => undefined);
    await observer.stop().catch(() => undefined);
    await bus.close().catch(() => undefined);
    for (const s of services.values()) await s.terminate().catch(() => undefined);
    // Kept or not, the servers stop: a finished campaign leaves no broker or database running.
    if (process.env.ROBUSTRL_CHAOS_KEEP === '1') {
      infra.stop();
      progress(`kept ${infra.dir} (ROBUSTRL_CHAOS_KEEP=1): logs and the servers' data; the broker and PostgreSQL are stopped`);
    } else infra.destroy();
  }
}

function fakeVerdict() {
  return {
    verdictId: 'chaos/misplaced/1',
    machineId: 'rollout-0',
    role: 'rollout' as const,
    rule: 'rollout-silent',
    evidence: { detail: 'published on the wrong topic by the chaos run' },
    handledAs: 'rollout' as const,
    machineFaulty: true,
    detectionLatencyMs: 0,
  };
}
