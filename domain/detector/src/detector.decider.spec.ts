import { DeciderRun, DeciderSpecification } from '@robustrl/domain-kit';
import { draft, Draft, isOneOf, Role } from '@robustrl/contracts';
import { at, iso, published, timeline } from '@robustrl/testing/job-timeline';
import { createDetectorDecider, DETECTOR_INPUT_TYPES, DetectorDecider, DetectorDraft, DetectorEvent } from './detector.decider';
import { AgentSilentRule, DEFAULT_DETECTION_RULES, DetectionRule } from './rules';

const msg = timeline();
const spec = DeciderSpecification.for(DetectorDecider);
const eq = (actual: Draft[], expected: readonly Draft[]) => expect(actual).toEqual(expected);

const job = msg(0, 'JobStarted', { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 3 });
const register = (machineId: string, role: Role, s = 0) =>
  msg(s, 'MachineRegistered', { machineId, role, zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: `${machineId}:7070`, dpRank: 0 });
const phase = (s: number, machineId: string, p: Parameters<typeof msg<'RolePhaseChanged'>>[2]['phase'], role: Role = 'trainer') =>
  msg(s, 'RolePhaseChanged', { machineId, role, phase: p, step: 1, changedAt: iso(s) });
const gpu = (s: number, machineId: string, tensorActive: number) =>
  msg(s, 'GpuActivitySampled', { machineId, sampledAt: iso(s), intervalSeconds: 10, tensorActive, source: 'emulated' });
const throughput = (s: number, machineId: string, tokensPerSecond: number, extra: Partial<{ inFlight: number; awaitingTools: number }> = {}) =>
  msg(s, 'RolloutThroughputSampled', {
    machineId,
    rolloutId: machineId,
    sampledAt: iso(s),
    windowSeconds: 10,
    tokensPerSecond,
    completedRequests: tokensPerSecond > 0 ? 1 : 0,
    inFlightRequests: extra.inFlight ?? 8,
    awaitingTools: extra.awaitingTools ?? 0,
  });
const tick = (s: number) => ({ kind: 'tick' as const, now: at(s) });

/**
 * Every rule but the liveness rule: for specs of a role rule whose histories end a machine's samples
 * early (what a dead machine looks like), which the liveness rule would probe on its own first.
 */
const WithoutLiveness = createDetectorDecider({ rules: DEFAULT_DETECTION_RULES.filter((r) => r !== AgentSilentRule) });

/** Fold a history and collect everything the detector emits along the way, as the service shell would. */
function run(history: DetectorEvent[], untilSeconds: number, tickEverySeconds = 1, decider = DetectorDecider) {
  return runAll(history, untilSeconds, tickEverySeconds, decider);
}

function runAll(history: DetectorEvent[], untilSeconds: number, tickEverySeconds: number, decider: typeof DetectorDecider) {
  const detector = DeciderRun.for(decider, published()).given();
  const queue = [...history].sort((a, b) => Date.parse(a.occurredAt) - Date.parse(b.occurredAt));
  for (let s = 0; s <= untilSeconds; s += tickEverySeconds) {
    while (queue.length && Date.parse(queue[0].occurredAt) <= at(s)) {
      const m = queue.shift()!;
      if (isOneOf(m, DETECTOR_INPUT_TYPES)) detector.observe(m, Date.parse(m.occurredAt));
      else detector.fold(m);
    }
    detector.tick(at(s));
  }
  return detector.emitted.map(({ now, output }) => ({ at: now, draft: output as Draft }));
}

describe('trainer rule: 300 s without TensorCore activity, only inside the training phase', () => {
  // The trainer rule on its own: these histories stop the samples after the first (see WithoutLiveness).
  const spec = DeciderSpecification.for(WithoutLiveness);
  const run = (history: DetectorEvent[], untilSeconds: number) => runAll(history, untilSeconds, 1, WithoutLiveness);
  const trainer = [job, register('trainer-0', 'trainer'), phase(0, 'trainer-0', 'training'), gpu(10, 'trainer-0', 0.7)];

  it('confirms a trainer idle for the whole window in the training phase', () => {
    spec
      .given([...trainer])
      .when(tick(310))
      .then(
        [
          draft('FaultConfirmed', {
            verdictId: 'trainer-0/trainer-idle/1',
            machineId: 'trainer-0',
            role: 'trainer',
            rule: 'trainer-idle',
            handledAs: 'trainer',
            machineFaulty: false,
            detectionLatencyMs: 300_000,
            evidence: {
              windowSeconds: 300,
              lastActivityAt: iso(10),
              faultEvidenceSince: iso(10),
              detail: 'no TensorCore activity for 300 s inside the training phase',
            },
          }),
        ],
        eq,
      );
  });

  it('does not confirm one second before the window ends', () => {
    spec
      .given([...trainer])
      .when(tick(309))
      .thenNothingHappened(eq);
  });

  it('never counts context switch, weight update, advantage or checkpoint time toward the window', () => {
    const pauses = [
      phase(100, 'trainer-0', 'checkpoint'),
      phase(400, 'trainer-0', 'weight-update'),
      phase(700, 'trainer-0', 'context-switch'),
      phase(1000, 'trainer-0', 'advantage'),
      phase(1300, 'trainer-0', 'training'),
    ];
    // 90 s idle in training before the checkpoint, then 1200 s of GPU-free phases, then training again.
    spec
      .given([...trainer, ...pauses])
      .when(tick(1300 + 209))
      .thenNothingHappened(eq);
    spec
      .given([...trainer, ...pauses])
      .when(tick(1300 + 210))
      .then([expect.objectContaining({ type: 'FaultConfirmed', data: expect.objectContaining({ rule: 'trainer-idle' }) }) as unknown as DetectorDraft], eq);
  });

  it('any TensorCore activity restarts the window', () => {
    spec
      .given([...trainer, gpu(200, 'trainer-0', 0.01)])
      .when(tick(499))
      .thenNothingHappened(eq);
  });

  it('a trainer outside the training phase is never flagged, however long', () => {
    spec
      .given([job, register('trainer-0', 'trainer'), phase(0, 'trainer-0', 'checkpoint')])
      .when(tick(10_000))
      .thenNothingHappened(eq);
  });

  it('the echo of a dead rank on its peers is one verdict, not one per rank', () => {
    const two = [job, register('trainer-0', 'trainer'), register('trainer-1', 'trainer'), phase(0, 'trainer-0', 'training'), phase(0, 'trainer-1', 'training')];
    const out = run(two, 400).filter((e) => e.draft.type === 'FaultConfirmed');
    expect(out).toHaveLength(1);
  });

  it("a rank idle long after its peer's verdict is a fault of its own, not an echo", () => {
    const two = [
      job,
      register('trainer-0', 'trainer'),
      register('trainer-1', 'trainer'),
      phase(0, 'trainer-0', 'training'),
      phase(400, 'trainer-1', 'training'),
    ];
    const confirmed = run(two, 800)
      .filter((e) => e.draft.type === 'FaultConfirmed')
      .map((e) => [(e.draft.data as { machineId: string }).machineId, (e.at - at(0)) / 1000]);
    expect(confirmed).toEqual([
      ['trainer-0', 300],
      ['trainer-1', 700],
    ]);
  });

  it('a restarted trainer is watched again once it reports a phase', () => {
    const emitted = run([...trainer, phase(320, 'trainer-0', 'initializing'), phase(330, 'trainer-0', 'training')], 640);
    const confirmedAt = emitted.filter((e) => e.draft.type === 'FaultConfirmed').map((e) => (e.at - at(0)) / 1000);
    expect(confirmedAt).toEqual([310, 630]);
  });
});

describe('rollout rule: 60 s of zero throughput → probe → confirmed only if the agent stays silent', () => {
  const rollout = [job, register('rollout-0', 'rollout'), throughput(5, 'rollout-0', 900)];

  it('suspects after the window and probes the agent', () => {
    spec
      .given(rollout)
      .when(tick(65))
      .then(
        [
          draft('FaultSuspected', {
            verdictId: 'rollout-0/rollout-silent/1',
            machineId: 'rollout-0',
            role: 'rollout',
            rule: 'rollout-silent',
            evidence: { windowSeconds: 60, lastActivityAt: iso(5), faultEvidenceSince: iso(5), observed: 900, detail: 'no rollout throughput for 60 s' },
          }),
          draft('HeartbeatProbeRequested', { probeId: 'rollout-0/rollout-silent/1/probe', machineId: 'rollout-0', timeoutMs: 10_000 }),
        ],
        eq,
      );
  });

  it('confirms when the probe times out, naming the probe in the evidence', () => {
    const emitted = run(rollout, 80);
    const confirmed = emitted.find((e) => e.draft.type === 'FaultConfirmed')!;
    expect((confirmed.at - at(0)) / 1000).toBe(75);
    expect(confirmed.draft.data).toMatchObject({
      verdictId: 'rollout-0/rollout-silent/1',
      handledAs: 'rollout',
      machineFaulty: true,
      detectionLatencyMs: 70_000,
      evidence: { probe: { probeId: 'rollout-0/rollout-silent/1/probe', result: 'timed-out' } },
    });
  });

  it('an ack clears the suspicion and restarts the window', () => {
    const ack = msg(66, 'HeartbeatAcked', { probeId: 'rollout-0/rollout-silent/1/probe', machineId: 'rollout-0', ackedAt: iso(66) });
    const emitted = run([...rollout, ack], 130);
    expect(emitted.map((e) => [e.draft.type, (e.at - at(0)) / 1000])).toEqual([
      ['FaultSuspected', 65],
      ['HeartbeatProbeRequested', 65],
      ['SuspicionCleared', 66],
      ['FaultSuspected', 126],
      ['HeartbeatProbeRequested', 126],
    ]);
    expect(emitted[2].draft.data).toMatchObject({
      reason: 'the agent answered the heartbeat probe in 1000 ms',
      evidence: { probe: { result: 'acked', latencyMs: 1000 } },
    });
  });

  it('a rollout waiting on tools for 15 minutes that answers its probes is never flagged', () => {
    const waiting = [job, register('rollout-0', 'rollout'), throughput(0, 'rollout-0', 800), throughput(10, 'rollout-0', 0, { inFlight: 8, awaitingTools: 8 })];
    // The agent answers each probe 2 s after it is sent, as a live agent does.
    const detector = DeciderRun.for(DetectorDecider, published()).given(waiting);
    for (let s = 10; s <= 10 + 15 * 60; s += 1) {
      for (const out of detector.tick(at(s))) {
        if (out.type === 'HeartbeatProbeRequested') {
          detector.observe(msg(s + 2, 'HeartbeatAcked', { probeId: out.data.probeId, machineId: 'rollout-0', ackedAt: iso(s + 2) }), at(s + 2));
        }
      }
    }
    const verdicts = detector.outputs().map((o) => o.type);
    expect(verdicts).not.toContain('FaultConfirmed');
    expect(verdicts.filter((v) => v === 'SuspicionCleared').length).toBe(verdicts.filter((v) => v === 'FaultSuspected').length);
  });

  it('output resuming while the probe is out clears the suspicion', () => {
    const emitted = run([...rollout, throughput(68, 'rollout-0', 500)], 90);
    expect(emitted.map((e) => e.draft.type)).toEqual(['FaultSuspected', 'HeartbeatProbeRequested', 'SuspicionCleared']);
  });
});

describe('hybrid roles: the rollout rule applies, the fault is a trainer fault', () => {
  it('confirms a silent hybrid machine through the probe and hands it to the trainer path', () => {
    const emitted = run([job, register('hybrid-0', 'hybrid'), phase(0, 'hybrid-0', 'training', 'hybrid')], 80);
    const confirmed = emitted.find((e) => e.draft.type === 'FaultConfirmed')!;
    expect(confirmed.draft.data).toMatchObject({ rule: 'rollout-silent', role: 'hybrid', handledAs: 'trainer' });
  });

  it('the trainer idle rule does not apply to hybrid machines', () => {
    spec
      .given([job, register('hybrid-0', 'hybrid'), phase(0, 'hybrid-0', 'training', 'hybrid'), throughput(0, 'hybrid-0', 100)])
      .when(tick(59))
      .thenNothingHappened(eq);
  });
});

describe('explicit signals confirm at once', () => {
  it.each([
    ['process-exited', false],
    ['step-exception', false],
    ['ecc-error', true],
    ['xid-error', true],
    // The machine's node is being drained: it is going, whatever its processes do.
    ['node-draining', true],
    // The engine, not the machine: an engine restart answers it.
    ['weight-load-stalled', false],
  ] as const)('%s → confirmed immediately (machine faulty: %s)', (signal, machineFaulty) => {
    const signalled = msg(42, 'AgentFaultSignalled', {
      machineId: 'trainer-0',
      role: 'trainer',
      signal,
      detail: 'boom',
      exitCode: signal === 'process-exited' ? 137 : null,
      observedAt: iso(42),
    });
    spec
      .given([job, register('trainer-0', 'trainer')])
      .when({ kind: 'observe', message: signalled, now: at(42) })
      .then(
        [
          draft('FaultConfirmed', {
            verdictId: 'trainer-0/explicit-signal/1',
            machineId: 'trainer-0',
            role: 'trainer',
            rule: 'explicit-signal',
            handledAs: 'trainer',
            machineFaulty,
            detectionLatencyMs: 0,
            evidence: { signal, faultEvidenceSince: iso(42), detail: signal === 'process-exited' ? 'boom (exit code 137)' : 'boom' },
          }),
        ],
        eq,
      );
  });

  it('a signal that carries its evidence age dates the fault back to it (a load that never finished: from its start)', () => {
    const signalled = msg(200, 'AgentFaultSignalled', {
      machineId: 'rollout-0',
      role: 'rollout',
      signal: 'weight-load-stalled',
      detail: 'the engine did not finish loading version 3 within 120 s',
      exitCode: null,
      observedAt: iso(200),
      evidenceForMs: 120_000,
    });
    spec
      .given([job, register('rollout-0', 'rollout')])
      .when({ kind: 'observe', message: signalled, now: at(200) })
      .then(
        [
          draft('FaultConfirmed', {
            verdictId: 'rollout-0/explicit-signal/1',
            machineId: 'rollout-0',
            role: 'rollout',
            rule: 'explicit-signal',
            handledAs: 'rollout',
            machineFaulty: false,
            detectionLatencyMs: 120_000,
            evidence: { signal: 'weight-load-stalled', faultEvidenceSince: iso(80), detail: 'the engine did not finish loading version 3 within 120 s' },
          }),
        ],
        eq,
      );
  });

  it("a drain notice's time left becomes its deadline on the detector's clock, in the verdict's evidence", () => {
    const signalled = msg(200, 'AgentFaultSignalled', {
      machineId: 'rollout-0',
      role: 'rollout',
      signal: 'node-draining',
      detail: 'EC2 spot instance action terminate',
      exitCode: null,
      // The agent's own clock is off: its observedAt is not used, only the duration it reported.
      observedAt: iso(9_999),
      departsInMs: 120_000,
    });
    spec
      .given([job, register('rollout-0', 'rollout')])
      .when({ kind: 'observe', message: signalled, now: at(200) })
      .then(
        [
          draft('FaultConfirmed', {
            verdictId: 'rollout-0/explicit-signal/1',
            machineId: 'rollout-0',
            role: 'rollout',
            rule: 'explicit-signal',
            handledAs: 'rollout',
            machineFaulty: true,
            detectionLatencyMs: 0,
            evidence: { signal: 'node-draining', faultEvidenceSince: iso(200), detail: 'EC2 spot instance action terminate', departsAt: iso(320) },
          }),
        ],
        eq,
      );
  });

  it('a machine already confirmed is not confirmed again', () => {
    const first = msg(42, 'AgentFaultSignalled', {
      machineId: 'rollout-0',
      role: 'rollout',
      signal: 'process-exited',
      detail: 'x',
      exitCode: 1,
      observedAt: iso(42),
    });
    const confirmed = {
      ...draft('FaultConfirmed', {
        verdictId: 'rollout-0/explicit-signal/1',
        machineId: 'rollout-0',
        role: 'rollout',
        rule: 'explicit-signal',
        handledAs: 'rollout',
        machineFaulty: false,
        detectionLatencyMs: 0,
        evidence: {},
      }),
      occurredAt: iso(42),
    } as unknown as DetectorEvent;
    spec
      .given([job, register('rollout-0', 'rollout'), first, confirmed])
      .when({ kind: 'observe', message: { ...first, occurredAt: iso(43) }, now: at(43) })
      .thenNothingHappened(eq);
  });
});

describe('straggler rule: reported, not restarted', () => {
  const peers = ['rollout-0', 'rollout-1', 'rollout-2', 'rollout-3'];
  const history = (slowFrom: number, until: number) => {
    const h: DetectorEvent[] = [job, ...peers.map((p) => register(p, 'rollout'))];
    for (let s = 0; s <= until; s += 10) for (const p of peers) h.push(throughput(s, p, p === 'rollout-3' && s >= slowFrom ? 50 : 1000));
    return h;
  };

  it('suspects a rollout far below its peers for the window, and never confirms it', () => {
    const emitted = run(history(100, 500), 500);
    expect(emitted.map((e) => [e.draft.type, (e.draft.data as { machineId: string }).machineId])).toEqual([['FaultSuspected', 'rollout-3']]);
    expect(emitted[0].draft.data).toMatchObject({ rule: 'straggler', evidence: { observed: 50, peerMedian: 1000 } });
    expect((emitted[0].at - at(0)) / 1000).toBe(400);
  });

  it('a rollout waiting on tools is not a straggler', () => {
    const h: DetectorEvent[] = [job, ...peers.map((p) => register(p, 'rollout'))];
    for (let s = 0; s <= 500; s += 10)
      for (const p of peers) h.push(p === 'rollout-3' ? throughput(s, p, 0, { inFlight: 4, awaitingTools: 4 }) : throughput(s, p, 1000));
    expect(run(h, 500).filter((e) => (e.draft.data as { rule?: string }).rule === 'straggler')).toEqual([]);
  });
});

describe('throughput seen by several router replicas', () => {
  const peers = ['rollout-0', 'rollout-1', 'rollout-2', 'rollout-3'];
  /** A sample of one router's share: the same rollout, as one replica counted it. */
  const share = (s: number, machineId: string, tokensPerSecond: number, source: string) => ({
    ...throughput(s, machineId, tokensPerSecond, { inFlight: 4 }),
    source,
  });

  /** rollout-3 makes 50 tokens/s from 100 s, its peers 1,000; each split evenly between replicas r0 and r1 (and `idleManager`: a router serving none). */
  const stragglers = (idleManager: boolean) => {
    const h: DetectorEvent[] = [job, ...peers.map((p) => register(p, 'rollout'))];
    for (let s = 0; s <= 500; s += 10)
      for (const p of peers) {
        const whole = p === 'rollout-3' && s >= 100 ? 50 : 1000;
        h.push(share(s, p, whole / 2, 'rollout-manager/router/r0'), share(s + 3, p, whole / 2, 'rollout-manager/router/r1'));
        // Its sample says nothing in flight: alone, it would read as a rollout with no work.
        if (idleManager) h.push({ ...throughput(s + 6, p, 0, { inFlight: 0 }), source: 'rollout-manager/router' });
      }
    return run(h, 500).filter((e) => (e.draft.data as { rule?: string }).rule === 'straggler');
  };

  it("the rollout manager's own router, serving none of the requests, does not hide a straggler", () => {
    expect(stragglers(true).map((e) => (e.draft.data as { machineId: string }).machineId)).toEqual(['rollout-3']);
  });

  it('a rollout slow in the sum is still found', () => {
    const suspected = stragglers(false);
    expect(suspected.map((e) => (e.draft.data as { machineId: string }).machineId)).toEqual(['rollout-3']);
    expect(suspected[0].draft.data).toMatchObject({ evidence: { observed: 50, peerMedian: 1000 } });
  });
});

describe('pluggable rules', () => {
  it('a new rule is added without touching the core', () => {
    const sdc: DetectionRule<{ mismatch: boolean }> = {
      name: 'silent-data-corruption',
      timeWindowed: false,
      appliesTo: (role) => role === 'trainer',
      initialState: () => ({ mismatch: false }),
      observe: (s, m) => (m.type === 'AgentFaultSignalled' && m.data.detail.startsWith('checksum') ? { mismatch: true } : s),
      evaluate: (s, { now }) => (s.mismatch ? { verdict: 'suspect', since: now, evidence: { detail: 'gradient checksum mismatch' } } : null),
      discountBlindness: (s) => s,
    };
    const decider = createDetectorDecider({ rules: [sdc as DetectionRule] });
    const signalled = msg(5, 'AgentFaultSignalled', {
      machineId: 'trainer-0',
      role: 'trainer',
      signal: 'step-exception',
      detail: 'checksum differs across replicas',
      exitCode: null,
      observedAt: iso(5),
    });
    DeciderSpecification.for(decider)
      .given([job, register('trainer-0', 'trainer')])
      .when({ kind: 'observe', message: signalled, now: at(5) })
      .then(
        [
          draft('FaultSuspected', {
            verdictId: 'trainer-0/silent-data-corruption/1',
            machineId: 'trainer-0',
            role: 'trainer',
            rule: 'silent-data-corruption',
            evidence: { detail: 'gradient checksum mismatch' },
          }),
        ],
        eq,
      );
  });

  it('per-job settings from JobStarted scale the windows', () => {
    const fast = msg(0, 'JobStarted', {
      mode: 'async',
      resumedFromStep: null,
      trainerMachines: 1,
      rolloutMachines: 0,
      detection: { trainerIdleWindowSeconds: 3 },
    });
    spec
      .given([fast, register('trainer-0', 'trainer'), phase(0, 'trainer-0', 'training')])
      .when(tick(3))
      .then([expect.objectContaining({ type: 'FaultConfirmed' }) as unknown as DetectorDraft], eq);
  });
});

/**
 * A trainer that died silently outside the training phase (weight update, checkpoint,
 * waiting for its batch) was never detected: the trainer rule pauses there and no other rule covered it.
 */
describe('liveness rule: an agent whose reports stop is probed, in every role and phase', () => {
  /** The agent's periodic GPU reports, every 10 s from `from` to `to` (the agent runs whatever the phase). */
  const reports = (machineId: string, from: number, to: number, tensorActive = 0) =>
    Array.from({ length: Math.floor((to - from) / 10) + 1 }, (_, i) => gpu(from + i * 10, machineId, tensorActive));

  it.each([
    ['weight-update', 'a weight update'],
    ['checkpoint', 'a checkpoint'],
    ['idle', 'waiting for its batch'],
  ] as const)('a trainer that dies in the %s phase (%s) is probed after 60 s of silence and confirmed when the probe times out', (p, _description) => {
    const history = [job, register('trainer-0', 'trainer'), phase(0, 'trainer-0', p), ...reports('trainer-0', 0, 100)];
    // The failing case first: without the liveness rule nothing ever notices.
    expect(run(history, 3_600, 5, WithoutLiveness)).toEqual([]);
    const emitted = run(history, 400);
    expect(emitted.map((e) => [e.draft.type, (e.at - at(0)) / 1000])).toEqual([
      ['FaultSuspected', 160],
      ['HeartbeatProbeRequested', 160],
      ['FaultConfirmed', 170],
    ]);
    expect(emitted[2].draft.data).toMatchObject({
      verdictId: 'trainer-0/agent-silent/1',
      rule: 'agent-silent',
      handledAs: 'trainer',
      machineFaulty: true,
      detectionLatencyMs: 70_000,
      evidence: { windowSeconds: 60, lastActivityAt: iso(100), probe: { result: 'timed-out' } },
    });
  });

  it('a rollout machine whose agent died while the router still counts its trajectories as waiting on tools is found too', () => {
    const history = [
      job,
      register('rollout-0', 'rollout'),
      ...reports('rollout-0', 0, 50),
      ...Array.from({ length: 30 }, (_, i) => throughput(i * 10, 'rollout-0', 0, { inFlight: 4, awaitingTools: 4 })),
    ];
    const confirmed = run(history, 300).filter((e) => e.draft.type === 'FaultConfirmed');
    expect(confirmed[0].draft.data).toMatchObject({ machineId: 'rollout-0', handledAs: 'rollout' });
  });

  it('a standby whose agent dies right after announcing its promotion (no sample as a trainer yet) is probed after the window, not left to the command timeout', () => {
    const history = [
      job,
      register('rollout-0', 'rollout'),
      ...reports('rollout-0', 0, 100),
      ...Array.from({ length: 11 }, (_, i) => throughput(i * 10, 'rollout-0', 900)),
      msg(101, 'MachineRoleChanged', { machineId: 'rollout-0', from: 'rollout', to: 'trainer', reason: 'warm standby for trainer-0' }),
    ];
    const emitted = run(history, 400);
    expect(emitted.map((e) => [e.draft.type, (e.at - at(0)) / 1000])).toEqual([
      ['FaultSuspected', 161],
      ['HeartbeatProbeRequested', 161],
      ['FaultConfirmed', 171],
    ]);
    expect(emitted[2].draft.data).toMatchObject({ machineId: 'rollout-0', rule: 'agent-silent', handledAs: 'trainer', machineFaulty: true });
  });

  it('hours of weight updates and checkpoints with the agent reporting raise nothing', () => {
    const history = [
      job,
      register('trainer-0', 'trainer'),
      phase(0, 'trainer-0', 'weight-update'),
      phase(1_800, 'trainer-0', 'checkpoint'),
      phase(5_400, 'trainer-0', 'idle'),
      ...reports('trainer-0', 0, 7_200),
    ];
    expect(run(history, 7_200, 5)).toEqual([]);
  });

  it('an answered probe restarts the window; an agent that never sent a report has no heartbeat to lose', () => {
    const ack = msg(161, 'HeartbeatAcked', { probeId: 'trainer-0/agent-silent/1/probe', machineId: 'trainer-0', ackedAt: iso(161) });
    const history = [job, register('trainer-0', 'trainer'), phase(0, 'trainer-0', 'checkpoint'), ...reports('trainer-0', 0, 100), ack];
    expect(
      run(history, 230)
        .map((e) => [e.draft.type, (e.at - at(0)) / 1000])
        .filter(([, s]) => s !== 160),
    ).toEqual([
      ['SuspicionCleared', 161],
      ['FaultSuspected', 221],
      ['HeartbeatProbeRequested', 221],
    ]);
    expect(run([job, register('trainer-9', 'trainer'), phase(0, 'trainer-9', 'checkpoint')], 3_600, 5)).toEqual([]);
  });
});
