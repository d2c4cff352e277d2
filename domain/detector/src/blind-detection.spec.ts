import { DataOf, Draft, InputGapReason, MessageType } from '@robustrl/contracts';
import { DeciderRun } from '@robustrl/domain-kit';
import { at, iso, published, timeline } from '@robustrl/testing/job-timeline';
import { createDetectorDecider, DetectorInput } from './detector.decider';
import { PAPER_DETECTION_DEFAULTS } from './detection-settings';

/**
 * Detection knows when it is blind (docs/contributors/detection.md "Detection knows when it is blind"): while the
 * host reports a gap in the detector's own input (DetectionPaused … DetectionResumed) silence is not
 * counted; after it windows resume where they were (paused, not reset), machines get a grace period,
 * and verdicts come only from evidence and probes seen after the gap. Times are seconds since T0.
 */
const ROLLOUTS = Array.from({ length: 120 }, (_, i) => `rollout-${i}`);
const TRAINERS = ['trainer-0', 'trainer-1'];
const SAMPLE_S = 5;
// Paper windows (rollout 60 s, trainer 300 s), 10 s probes, 30 s grace.
const decider = createDetectorDecider({ defaults: PAPER_DETECTION_DEFAULTS });

function job() {
  const msg = timeline('blind-job');
  const run = DeciderRun.for(decider, published('blind-job')).given();
  const input = <T extends MessageType>(s: number, type: T, data: DataOf<T>) => run.observe(msg(s, type, data) as unknown as DetectorInput, at(s));
  return {
    run,
    input,
    start() {
      input(0, 'JobStarted', { mode: 'async', resumedFromStep: null, trainerMachines: TRAINERS.length, rolloutMachines: ROLLOUTS.length });
      for (const id of [...TRAINERS, ...ROLLOUTS]) {
        const role = id.startsWith('trainer') ? 'trainer' : 'rollout';
        input(0, 'MachineRegistered', { machineId: id, role, zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: `${id}:8086`, dpRank: 0 });
      }
      for (const id of TRAINERS) input(0, 'RolePhaseChanged', { machineId: id, role: 'trainer', phase: 'training', step: 1, changedAt: iso(0) });
    },
    rolloutSample: (s: number, id: string) =>
      input(s, 'RolloutThroughputSampled', {
        machineId: id,
        rolloutId: id,
        sampledAt: iso(s),
        windowSeconds: SAMPLE_S,
        tokensPerSecond: 900,
        completedRequests: 3,
        inFlightRequests: 8,
        awaitingTools: 0,
      }),
    trainerSample: (s: number, id: string) =>
      input(s, 'GpuActivitySampled', { machineId: id, sampledAt: iso(s), intervalSeconds: SAMPLE_S, tensorActive: 0.7, source: 'dcgm' }),
    paused: (s: number, since: number, reason: InputGapReason = 'broker-unreachable') =>
      input(s, 'DetectionPaused', { reason, blindSince: iso(since), detail: 'spec' }),
    resumed: (s: number, since: number, reason: InputGapReason = 'broker-unreachable') =>
      input(s, 'DetectionResumed', { reason, blindSince: iso(since), resumedAt: iso(s), blindMs: (s - since) * 1000 }),
  };
}

const ofType = (drafts: readonly Draft[], type: MessageType) => drafts.filter((d) => d.type === type);

/**
 * A job of 120 rollouts and 2 trainers, every machine healthy, with the broker down from `outageFrom`
 * to `outageTo`: nothing arrives in between. With `hostReportsGap` the host pauses detection a second
 * after the outage starts and resumes it a second after it ends (when its consumer caught up).
 */
function brokerOutage(outageFrom: number, outageTo: number, end: number, hostReportsGap: boolean) {
  const j = job();
  j.start();
  const outputs: Draft[] = [];
  for (let s = 1; s <= end; s++) {
    const inOutage = s >= outageFrom && s < outageTo;
    if (hostReportsGap && s === outageFrom + 1) outputs.push(...j.paused(s, outageFrom));
    if (hostReportsGap && s === outageTo + 1) outputs.push(...j.resumed(s, outageFrom));
    if (!inOutage && s % SAMPLE_S === 0) {
      for (const id of ROLLOUTS) outputs.push(...j.rolloutSample(s, id));
      for (const id of TRAINERS) outputs.push(...j.trainerSample(s, id));
    }
    outputs.push(...j.run.tick(at(s)));
  }
  return outputs;
}

describe('detector: a gap in its own input is not silence', () => {
  it('a 90 s broker outage, reported by the host, leads to no suspicion, probe or verdict', () => {
    const outputs = brokerOutage(100, 190, 400, true);
    expect(ofType(outputs, 'FaultSuspected')).toEqual([]);
    expect(ofType(outputs, 'HeartbeatProbeRequested')).toEqual([]);
    expect(ofType(outputs, 'FaultConfirmed')).toEqual([]);
  });

  it('the same outage unreported probes every machine at once (what the host must prevent)', () => {
    const outputs = brokerOutage(100, 190, 400, false);
    // Every rollout's throughput stopped (rollout rule) and every agent's reports stopped (liveness rule).
    expect(ofType(outputs, 'HeartbeatProbeRequested')).toHaveLength(ROLLOUTS.length + TRAINERS.length);
  });

  it('a ten-minute outage does not confirm the trainers either, though it is twice their window', () => {
    const outputs = brokerOutage(100, 700, 900, true);
    expect(ofType(outputs, 'FaultSuspected')).toEqual([]);
    expect(ofType(outputs, 'FaultConfirmed')).toEqual([]);
  });

  it('a rollout silent before the gap is suspected where its window and the grace say: paused, not reset, not counted', () => {
    const j = job();
    j.start();
    // rollout-0 last progressed at 40 (its window would end at 100), rollout-1 at 80 (window end 140).
    j.rolloutSample(40, 'rollout-0');
    j.rolloutSample(80, 'rollout-1');
    for (const id of ROLLOUTS.slice(2)) j.rolloutSample(80, id);
    j.paused(90, 90);
    // Blind from 90 to 180: 90 s discounted. rollout-0: 50 s silent before, window ends 10 s after the
    // gap but the grace runs to 210. rollout-1: 10 s silent before, window ends at 180 + 50 = 230.
    j.resumed(180, 90);
    const suspectedAt = new Map<string, number>();
    for (let s = 181; s <= 260; s++) {
      if (s % SAMPLE_S === 0) for (const id of ROLLOUTS.slice(2)) j.rolloutSample(s, id);
      for (const d of j.run.tick(at(s))) if (d.type === 'FaultSuspected') suspectedAt.set(d.data.machineId, s);
    }
    expect(Object.fromEntries(suspectedAt)).toEqual({ 'rollout-0': 210, 'rollout-1': 230 });
  });

  it('a trainer idle before a long gap keeps the idle time it accrued and is confirmed once the rest of the window passed after it', () => {
    const j = job();
    j.start();
    for (const id of ROLLOUTS) j.rolloutSample(1, id);
    // trainer-0 never shows TensorCore activity in training: 250 s accrued at the gap (window 300 s).
    j.trainerSample(1, 'trainer-1');
    j.paused(250, 250);
    j.resumed(850, 250);
    const confirmedAt: number[] = [];
    for (let s = 851; s <= 920; s++) {
      if (s % SAMPLE_S === 0) {
        j.trainerSample(s, 'trainer-1');
        for (const id of ROLLOUTS) j.rolloutSample(s, id);
      }
      for (const d of j.run.tick(at(s))) if (d.type === 'FaultConfirmed' && d.data.machineId === 'trainer-0') confirmedAt.push(s);
    }
    // 50 s of the window were left when the gap began: 850 + 50 = 900 (after the grace, which ends at 880).
    expect(confirmedAt).toEqual([900]);
  });

  it('a probe sent before the gap is withdrawn on resume, not confirmed: only a fresh probe that really goes unanswered confirms', () => {
    const j = job();
    j.start();
    // rollout-0 never produces: suspected and probed at 60.
    const probes: Draft[] = [];
    for (let s = 1; s <= 61; s++) {
      if (s % SAMPLE_S === 0) for (const id of ROLLOUTS.slice(1)) j.rolloutSample(s, id);
      probes.push(...ofType(j.run.tick(at(s)), 'HeartbeatProbeRequested'));
    }
    expect(probes.map((p) => (p.type === 'HeartbeatProbeRequested' ? p.data.machineId : ''))).toEqual(['rollout-0']);
    // The broker goes down before the ack could arrive; its 10 s timeout passes inside the gap.
    j.paused(62, 61);
    for (let s = 62; s <= 120; s++) expect(j.run.tick(at(s))).toEqual([]);
    const onResume = j.resumed(121, 61);
    expect(onResume).toEqual([expect.objectContaining({ type: 'SuspicionCleared', data: expect.objectContaining({ machineId: 'rollout-0' }) })]);
    // Fresh evidence: rollout-0 is suspected again after the grace (its window was full before the gap),
    // probed again, and confirmed only when that probe times out.
    const after: Array<{ s: number; type: string }> = [];
    for (let s = 122; s <= 170; s++) {
      if (s % SAMPLE_S === 0) for (const id of ROLLOUTS.slice(1)) j.rolloutSample(s, id);
      for (const d of j.run.tick(at(s))) after.push({ s, type: d.type });
    }
    expect(after).toEqual([
      { s: 151, type: 'FaultSuspected' },
      { s: 151, type: 'HeartbeatProbeRequested' },
      { s: 161, type: 'FaultConfirmed' },
    ]);
  });

  it('the grace after a short gap (a quick restart) is as long as the gap, not the full 30 s', () => {
    const j = job();
    j.start();
    for (const id of ROLLOUTS.slice(1)) j.rolloutSample(50, id);
    // rollout-0 silent since 0: 58 s counted when the detector restarts at 58 and catches up at 62.
    j.paused(59, 58, 'consumer-restart');
    j.resumed(62, 58, 'consumer-restart');
    const suspected: number[] = [];
    for (let s = 62; s <= 70; s++) for (const d of j.run.tick(at(s))) if (d.type === 'FaultSuspected') suspected.push(s);
    // Window: 60 s of counted silence = 62 + 2; grace: 4 s (the gap) = 66.
    expect(suspected).toEqual([66]);
  });

  it('an explicit fault signal confirms at once even while the detector is blind to the rest', () => {
    const j = job();
    j.start();
    j.paused(10, 10, 'consumer-lag');
    const out = j.input(11, 'AgentFaultSignalled', {
      machineId: 'rollout-7',
      role: 'rollout',
      signal: 'xid-error',
      detail: 'Xid 79',
      exitCode: null,
      observedAt: iso(11),
    });
    expect(out).toEqual([expect.objectContaining({ type: 'FaultConfirmed', data: expect.objectContaining({ machineId: 'rollout-7', machineFaulty: true }) })]);
  });

  it('telemetry folded while blind (a backlog being read) evaluates no window; a second pause keeps the first start', () => {
    const j = job();
    j.start();
    j.paused(200, 100, 'consumer-restart');
    j.paused(201, 150, 'broker-unreachable');
    expect(j.run.state.blind).toEqual({ since: at(100), reason: 'consumer-restart' });
    // A backlog sample of rollout-3 read at 202, when every other rollout looks 200 s silent: nothing decided.
    expect(j.rolloutSample(120, 'rollout-3')).toEqual([]);
    expect(j.run.tick(at(202))).toEqual([]);
    expect(j.run.emitted.map((e) => e.output.type)).toEqual([]);
  });

  it('a task restart (a resumed JobStarted) withdraws open suspicions and judges each machine again only once it registers again', () => {
    const j = job();
    j.start();
    for (const id of ROLLOUTS.slice(1)) j.rolloutSample(50, id);
    // rollout-0 silent since 0: suspected at 60, its probe out.
    const before = j.run.tick(at(60));
    expect(ofType(before, 'FaultSuspected').map((d) => (d as Draft<'FaultSuspected'>).data.machineId)).toEqual(['rollout-0']);
    // The task restarts at 65: the open suspicion is withdrawn, not confirmed when its probe would have expired.
    const restarted = j.input(65, 'JobStarted', { mode: 'async', resumedFromStep: 4, trainerMachines: TRAINERS.length, rolloutMachines: ROLLOUTS.length });
    expect(ofType(restarted, 'SuspicionCleared').map((d) => (d as Draft<'SuspicionCleared'>).data.reason)).toEqual([
      'the task restarted from its checkpoint: every role starts over',
    ]);
    // Agents take their time to come up on a loaded host: rollout-0 registers again at 100, rollout-1 never
    // does, a registration of rollout-2 from before the restart is read late.
    const reg = (s: number, id: string) =>
      j.input(s, 'MachineRegistered', {
        machineId: id,
        role: 'rollout',
        zone: 'az-1',
        hardwareClass: 'h100x8',
        gpus: 8,
        agentAddress: `${id}:8086`,
        dpRank: 0,
      });
    reg(100, 'rollout-0');
    reg(40, 'rollout-2');
    const suspected = new Set<string>();
    const when: number[] = [];
    for (let s = 66; s <= 170; s++)
      for (const d of j.run.tick(at(s)))
        if (d.type === 'FaultSuspected') {
          suspected.add(d.data.machineId);
          if (d.data.machineId === 'rollout-0') when.push(s);
        }
    // Judged from its new registration: 100 + 60 s of silence. The others, not registered again, are not judged.
    expect(when).toEqual([160]);
    expect([...suspected]).toEqual(['rollout-0']);
  });
  it('a machine that never registers again after its task restarted is confirmed faulty once its time to come back ran out', () => {
    const j = job();
    j.start();
    j.input(65, 'JobStarted', { mode: 'async', resumedFromStep: 4, trainerMachines: TRAINERS.length, rolloutMachines: ROLLOUTS.length });
    // Every machine comes back but trainer-1 (killed as its agent came up), some late on a loaded host.
    for (const id of [...TRAINERS, ...ROLLOUTS].filter((m) => m !== 'trainer-1')) {
      const role = id.startsWith('trainer') ? 'trainer' : 'rollout';
      j.input(id === 'rollout-7' ? 300 : 100, 'MachineRegistered', {
        machineId: id,
        role,
        zone: 'az-1',
        hardwareClass: 'h100x8',
        gpus: 8,
        agentAddress: `${id}:8086`,
        dpRank: 0,
      });
    }
    const notBack: Array<{ s: number; d: Draft<'FaultConfirmed'> }> = [];
    for (let s = 66; s <= 420; s++)
      for (const d of j.run.tick(at(s))) if (d.type === 'FaultConfirmed' && d.data.rule === 'not-back-after-task-restart') notBack.push({ s, d });
    // Five agent-silent windows (5 × 60 s) after the restart at 65; rollout-7, back at 300, was in time.
    expect(notBack.map(({ s, d }) => [s, d.data.machineId, d.data.handledAs, d.data.machineFaulty])).toEqual([[365, 'trainer-1', 'trainer', true]]);
    expect(notBack[0].d.data.evidence.detail).toBe('not registered again 300 s after its task restarted');
  });
});
