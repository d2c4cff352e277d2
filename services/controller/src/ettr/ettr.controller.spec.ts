import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { fromDeadLetterRecord, InProcessBus } from '@robustrl/bus';
import { createMessage, DEAD_LETTER_TOPIC, RobustrlMessage, Topics, topicOf } from '@robustrl/contracts';
import { createEttrProjection, EttrInput, ettrReport, viewAt } from '@robustrl/ettr';
import { MESSAGE_BUS, METRICS_REGISTRY, MetricsController } from '@robustrl/service-kit';
import { Registry } from 'prom-client';
import { eventually } from '@robustrl/testing/eventually';
import { at, iso, timeline } from '@robustrl/testing/job-timeline';
import { RecoveryMetrics } from '../metrics/recovery-metrics';
import { EttrJobs } from './ettr-jobs';
import { ETTR_OPTIONS, EttrProjector } from './ettr-projector';
import { ettrSettingsFromEnv } from './ettr-settings';
import { EttrController } from './ettr.controller';

const JOB = 'job-ettr';
const VERDICT = 'trainer-0/explicit-signal/1';
const RECOVERY = `${VERDICT}/recovery`;

/**
 * One trainer and one rollout machine of 8 GPUs each, working from t=0; the trainer fails at t=100
 * (explicit signal, detected at once), its group is restarted, the new process reports `initializing`
 * at 160 and `training` at 200. Accounted up to t=300:
 *   total 16 GPUs × 300 s; lost 8 GPUs × [100, 200) = 60 s restart + 40 s re-initialisation;
 *   ETTR = 1 − 800/4800 = 5/6, and the one whole 300 s window (ending at 300) the same.
 */
function history(): RobustrlMessage[] {
  const msg = timeline(JOB);
  const phase = (s: number, machineId: string, role: 'trainer' | 'rollout', p: 'training' | 'rollout' | 'initializing') =>
    msg(s, 'RolePhaseChanged', { machineId, role, phase: p, step: 0, changedAt: iso(s) });
  const machine = (machineId: string, role: 'trainer' | 'rollout') =>
    msg(0, 'MachineRegistered', {
      machineId,
      role,
      zone: 'z',
      hardwareClass: 'h100x8',
      gpus: 8,
      agentAddress: `${machineId}:7070`,
      dpRank: role === 'trainer' ? 0 : null,
    });
  return [
    msg(0, 'JobStarted', { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 1 }),
    machine('trainer-0', 'trainer'),
    machine('rollout-0', 'rollout'),
    phase(0, 'trainer-0', 'trainer', 'training'),
    phase(0, 'rollout-0', 'rollout', 'rollout'),
    msg(100, 'FaultConfirmed', {
      verdictId: VERDICT,
      machineId: 'trainer-0',
      role: 'trainer',
      rule: 'explicit-signal',
      handledAs: 'trainer',
      machineFaulty: false,
      detectionLatencyMs: 0,
      evidence: { signal: 'process-exited' },
    }),
    msg(100, 'RecoveryDecided', {
      recoveryId: RECOVERY,
      verdictId: VERDICT,
      machineId: 'trainer-0',
      action: 'restart-trainer-group',
      rule: 'trainer-fault',
      step: 0,
      evidence: {},
    }),
    msg(100, 'RestartTrainerGroup', {
      recoveryId: RECOVERY,
      commandId: `${RECOVERY}/1`,
      machines: ['trainer-0'],
      step: 0,
      checkpointStep: null,
      keepBatch: true,
    }),
    phase(160, 'trainer-0', 'trainer', 'initializing'),
    phase(200, 'trainer-0', 'trainer', 'training'),
  ];
}

/** How a replay from the beginning can deliver it: one topic's loop far ahead of the others (telemetry first, membership last). */
function replayOrder(messages: readonly RobustrlMessage[]) {
  const order = [Topics.telemetry, Topics.training, Topics.control, Topics.verdicts, Topics.membership];
  return order.flatMap((topic) => messages.filter((m) => topicOf(m.type) === topic).map((message) => ({ message, topic })));
}

const settings = ettrSettingsFromEnv({});
const inOrder = (messages: readonly RobustrlMessage[]) => {
  const p = createEttrProjection(settings);
  return messages.reduce((v, m) => p.evolve(v, m as EttrInput), p.initialView());
};

describe('ETTR settings from the environment', () => {
  it('defaults to a 300 s window sampled every 60 s, and names the variable at fault', () => {
    expect(ettrSettingsFromEnv({})).toMatchObject({ windowMs: 300_000, sampleMs: 60_000 });
    expect(ettrSettingsFromEnv({ ROBUSTRL_ETTR_WINDOW_SECONDS: '600', ROBUSTRL_ETTR_SAMPLE_SECONDS: '30' })).toMatchObject({
      windowMs: 600_000,
      sampleMs: 30_000,
    });
    expect(() => ettrSettingsFromEnv({ ROBUSTRL_ETTR_WINDOW_SECONDS: '90' })).toThrow(
      /ROBUSTRL_ETTR_WINDOW_SECONDS \(90\) must be a whole multiple of ROBUSTRL_ETTR_SAMPLE_SECONDS \(60\)/,
    );
    expect(() => ettrSettingsFromEnv({ ROBUSTRL_ETTR_SAMPLE_SECONDS: '0' })).toThrow(
      /ROBUSTRL_ETTR_SAMPLE_SECONDS must be a whole number of seconds greater than 0, got '0'/,
    );
    expect(() => ettrSettingsFromEnv({ ROBUSTRL_ETTR_WINDOW_SECONDS: '5m' })).toThrow(/ROBUSTRL_ETTR_WINDOW_SECONDS .* got '5m'/);
  });
});

describe('ETTR views fed in bus order', () => {
  const now = at(300);
  const expected = ettrReport(viewAt(inOrder(history()), now));

  it('folds a replay whose topics arrive out of step in the order the events happened', () => {
    // Folding in arrival order loses the phase reports of machines not registered yet: not the same job.
    expect(ettrReport(viewAt(inOrder(replayOrder(history()).map((r) => r.message)), now)).ettr).not.toBe(expected.ettr);

    const jobs = new EttrJobs(settings, { quietMs: 1_000 });
    for (const { message, topic } of replayOrder(history())) expect(jobs.accept(message, topic, 0)).toBe('accepted');
    expect(jobs.pendingEvents(JOB)).toBe(10); // a new job waits for every topic to show up
    expect(ettrReport(jobs.viewOf(JOB, now)!)).toEqual(expected); // reads do not wait
    jobs.flushAll(5_000); // every stream quiet: all of it is folded, in time order
    expect(jobs.pendingEvents(JOB)).toBe(0);
    expect(ettrReport(jobs.viewOf(JOB, now)!)).toEqual(expected);
    expect(expected.ettr).toBe(0.8333);
    expect(jobs.lateEvents(JOB)).toBe(0);
  });

  it('holds an event until the streams still delivering have passed it, and ignores redeliveries', () => {
    const [started, trainer, rollout, trainerWorks, rolloutWorks, fault, decided, restart, initializing, training] = history();
    const jobs = new EttrJobs(settings, { quietMs: 1_000, slackMs: 0 });
    for (const m of [started, trainer, rollout]) jobs.accept(m, Topics.membership, 0);
    jobs.flushAll(2_000);
    expect(jobs.pendingEvents(JOB)).toBe(0);

    jobs.accept(trainerWorks, Topics.telemetry, 2_100);
    jobs.accept(rolloutWorks, Topics.telemetry, 2_100);
    jobs.accept(decided, Topics.control, 2_200); // t=100 on control, telemetry (active) is at t=0
    expect(jobs.pendingEvents(JOB)).toBe(1);
    jobs.accept(fault, Topics.verdicts, 2_300);
    jobs.accept(restart, Topics.control, 2_300);
    jobs.accept(initializing, Topics.telemetry, 2_400); // telemetry passes t=100: the verdict, decision and restart fold
    expect(jobs.pendingEvents(JOB)).toBe(1);
    expect(jobs.accept(initializing, Topics.telemetry, 2_500)).toBe('duplicate');
    jobs.accept(training, Topics.telemetry, 2_600);
    jobs.flushAll(10_000);
    expect(ettrReport(jobs.viewOf(JOB, now)!)).toEqual(expected);

    // Older than what is folded: applied on arrival and counted, never dropped or thrown.
    const stepStarted = createMessage(
      'TrainingStepStarted',
      { step: 0, batchId: 'b0', startedAt: iso(50) },
      { jobId: JOB, source: 'spec', occurredAt: iso(50) },
    );
    expect(jobs.accept(stepStarted, Topics.training, 10_100)).toBe('late');
    expect(jobs.lateEvents(JOB)).toBe(1);
  });
});

describe('ETTR over HTTP and /metrics', () => {
  let bus: InProcessBus;
  let app: INestApplication | undefined;
  let base: string;

  const startApp = async () => {
    const moduleRef = await Test.createTestingModule({
      controllers: [EttrController, MetricsController],
      providers: [
        RecoveryMetrics,
        EttrProjector,
        { provide: MESSAGE_BUS, useValue: bus },
        { provide: METRICS_REGISTRY, useValue: new Registry() },
        { provide: ETTR_OPTIONS, useValue: { settings, now: () => at(300) } },
      ],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    base = await app.getUrl();
    return app.get(EttrProjector);
  };
  const get = async (path: string) => {
    const res = await fetch(`${base}${path}`);
    const text = await res.text();
    return { status: res.status, text, body: res.headers.get('content-type')?.includes('json') ? (JSON.parse(text) as any) : undefined };
  };
  const folded = (projector: EttrProjector) =>
    eventually(
      'the projector to receive the whole history',
      () => (projector.jobs.accepted(JOB) === 10 && projector.jobs.accepted('job-orphan') === 1 ? true : undefined),
      10_000,
    );

  beforeEach(() => {
    bus = new InProcessBus({ logger: { info: () => undefined, warn: () => undefined, error: () => undefined } });
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await bus.close();
  });

  it('rebuilds from the beginning of the topics on start, keeps folding live, and serves the report, the job list and the gauges', async () => {
    const all = history();
    await bus.publish(all.slice(0, 8)); // before the controller starts: only a replay can see these
    const projector = await startApp();
    await bus.publish(all.slice(8));
    // Bad input must not stop it: bytes that are no message (dead-lettered by the bus), a type it does
    // not read (filtered), and events of a job it never saw start, for a recovery it does not know.
    await bus.publishRaw({ topic: Topics.telemetry, key: JOB, value: '{"type":"RolePhaseChanged","data":' });
    const orphan = timeline('job-orphan');
    await bus.publish(orphan(10, 'CheckpointSaved', { step: 0, uri: 'file:///c0', blockingMs: 1 }));
    await bus.publish(orphan(10, 'RestartTask', { recoveryId: 'nobody/recovery', commandId: 'nobody/recovery/1', rule: 'escalate-repeated-fault-in-step' }));
    await folded(projector);

    const jobs = await get('/v1/jobs');
    expect(jobs.status).toBe(200);
    expect(jobs.body).toEqual([
      { jobId: JOB, mode: 'semi-sync', ettr: 0.8333, wallClockSeconds: 300 },
      { jobId: 'job-orphan', mode: null, ettr: 1, wallClockSeconds: 0 },
    ]);

    const report = await get(`/v1/jobs/${JOB}/ettr`);
    expect(report.status).toBe(200);
    const lost = {
      action: 'restart-trainer-group',
      detectionRule: 'explicit-signal',
      decisionRule: 'trainer-fault',
      role: 'trainer',
      faultMachineId: 'trainer-0',
      outageId: VERDICT,
      machineId: 'trainer-0',
    };
    expect(report.body).toMatchObject({
      jobId: JOB,
      mode: 'semi-sync',
      wallClockSeconds: 300,
      ettr: 0.8333,
      totalGpuHours: 1.3333,
      effectiveGpuHours: 1.1111,
      faults: 1,
      summary: 'lost 0.2 GPU-hours to restart-trainer-group',
      slidingWindowSeconds: 300,
      sampleSeconds: 60,
      slidingEttr: [{ atSeconds: 300, ettr: 0.8333 }],
      downtimeLedger: [
        { category: 'restart', ...lost, gpuHours: 0.1333 },
        { category: 'reinitialization', ...lost, gpuHours: 0.0889 },
      ],
      downtimeByAction: [{ action: 'restart-trainer-group', gpuHours: 0.2222 }],
      lateEvents: 0,
    });
    expect(report.body.downtimeByCategory).toContainEqual({ category: 'restart', gpuHours: 0.1333 });

    // A one-period window shows where the outage fell: [60,120) lost 20 s of 8 of 16 GPUs, [120,180) half.
    const perMinute = await get(`/v1/jobs/${JOB}/ettr?windowSeconds=60`);
    expect(perMinute.body.slidingEttr).toEqual([
      { atSeconds: 60, ettr: 1 },
      { atSeconds: 120, ettr: 0.8333 },
      { atSeconds: 180, ettr: 0.5 },
      { atSeconds: 240, ettr: 0.8333 },
      { atSeconds: 300, ettr: 1 },
    ]);

    const metrics = await get('/metrics');
    expect(metrics.status).toBe(200);
    const gauge = (series: string) => {
      const line = metrics.text.split('\n').find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    expect(gauge(`robustrl_ettr{job_id="${JOB}"}`)).toBeCloseTo(5 / 6, 10);
    expect(gauge(`robustrl_ettr_sliding{job_id="${JOB}"}`)).toBe(0.8333);
    expect(gauge(`robustrl_downtime_gpu_hours{job_id="${JOB}",category="restart",action="restart-trainer-group"}`)).toBe(0.1333);
    expect(gauge(`robustrl_downtime_gpu_hours{job_id="${JOB}",category="reinitialization",action="restart-trainer-group"}`)).toBe(0.0889);
    expect(gauge(`robustrl_ettr{job_id="job-orphan"}`)).toBe(1);
    expect(gauge(`robustrl_ettr_sliding{job_id="job-orphan"}`)).toBeUndefined(); // no whole window yet: no made-up value
    expect(metrics.text).toContain('# TYPE robustrl_recovery_decisions_total counter'); // the registry it shares

    const dead = await eventually('the bad record dead-lettered', () => {
      const mine = bus
        .read(DEAD_LETTER_TOPIC)
        .map(fromDeadLetterRecord)
        .filter((d) => d.consumerGroup.startsWith('robustrl-controller-ettr-'));
      return mine.length > 0 ? mine : undefined;
    });
    expect(dead[0].kind).toBe('invalid');
  });

  it('a restarted controller rebuilds the same views from the topics', async () => {
    await bus.publish(history());
    await bus.publish(
      timeline('job-orphan')(10, 'RestartTask', { recoveryId: 'nobody/recovery', commandId: 'nobody/recovery/1', rule: 'escalate-repeated-fault-in-step' }),
    );
    await folded(await startApp());
    const before = (await get(`/v1/jobs/${JOB}/ettr`)).body;
    await app!.close();

    await folded(await startApp());
    expect((await get(`/v1/jobs/${JOB}/ettr`)).body).toEqual(before);
  });

  it('answers 404 for a job it has not seen and 400 for a window that is not whole sample periods', async () => {
    await bus.publish(history());
    const projector = await startApp();
    await eventually('the history received', () => (projector.jobs.accepted(JOB) === 10 ? true : undefined), 10_000);

    const unknown = await get('/v1/jobs/nope/ettr');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toBe("no ETTR for job 'nope': none of its events has been seen on the bus");

    const ninety = await get(`/v1/jobs/${JOB}/ettr?windowSeconds=90`);
    expect(ninety.status).toBe(400);
    expect(ninety.body.error).toBe('windowSeconds (90) must be a multiple of the sample period of 60 s (ROBUSTRL_ETTR_SAMPLE_SECONDS)');
    for (const bad of ['abc', '0', '-60', '1.5e2']) {
      const res = await get(`/v1/jobs/${JOB}/ettr?windowSeconds=${bad}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatch(/windowSeconds must be a whole number of seconds/);
    }
    expect((await get(`/v1/jobs/${JOB}/ettr?windowSeconds=60&windowSeconds=120`)).status).toBe(400);
    expect((await get(`/v1/jobs/${JOB}/ettr?windowSeconds=${60 * 20_161}`)).body.error).toMatch(/exceeds the 1209600 s of sliding series kept/);
  });
});
