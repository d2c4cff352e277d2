import { DataOf, Draft, MessageOf, MessageType, Role } from '@robustrl/contracts';
import { codecOf, DeciderRun } from '@robustrl/domain-kit';
import { at, iso, published, timeline } from '@robustrl/testing/job-timeline';
import { createDetectorDecider, DetectorInput } from './detector.decider';
import { PAPER_DETECTION_DEFAULTS } from './detection-settings';
import { RankedValues } from './ranked-values';
import { DEFAULT_DETECTION_RULES, DetectionRule } from './rules';
import { prng } from '@robustrl/testing/seeded-random';

/**
 * At scale: the detector evolves in place, evaluates on a tick only the machines due, ranks
 * peers instead of sorting them, and leaves its derived index out of snapshots. These specs hold the
 * new machinery to the behaviour of the simple one (every machine evaluated on every tick) and to the
 * order-insensitivity of sample folding that a restart relies on. Times are seconds since T0.
 */

// Short windows so that a few hundred seconds see many verdicts, probes and clears.
const FAST = {
  ...PAPER_DETECTION_DEFAULTS,
  trainerIdleWindowMs: 40_000,
  rolloutSilentWindowMs: 20_000,
  probeTimeoutMs: 5_000,
  resumeGraceMs: 10_000,
  straggler: { enabled: true, ratio: 0.5, windowMs: 30_000, minPeers: 3, action: 'report' as const },
};
const indexed = createDetectorDecider({ defaults: FAST });
/** The same rules without deadlines: every machine is evaluated on every tick, as before the index. */
const everyTick = createDetectorDecider({
  defaults: FAST,
  rules: DEFAULT_DETECTION_RULES.map((r) => ({ ...r, dueAt: undefined }) as DetectionRule),
});

type Step = { s: number; input?: DetectorInput; tick?: true };

/**
 * A random job: trainers and rollouts sampling, going quiet, slowing down, crashing, re-registering,
 * changing roles and phases, answering some probes; the host going blind once. Acks answer the probes
 * the reference run asked for, so both runs get the same inputs as long as they decide alike.
 */
function randomJob(seed: number, machines = 24, seconds = 400) {
  const rnd = prng(seed);
  const msg = timeline(`job-${seed}`);
  const ids = Array.from({ length: machines }, (_, i) => (i < machines / 4 ? `trainer-${i}` : `rollout-${i}`));
  const role = new Map<string, Role>(ids.map((id) => [id, id.startsWith('trainer') ? 'trainer' : 'rollout']));
  const quietUntil = new Map<string, number>();
  const slow = new Set<string>();
  const script = new Map<number, DetectorInput[]>();
  const add = <T extends MessageType>(s: number, type: T, data: DataOf<T>) => {
    const list = script.get(s) ?? [];
    list.push(msg(s, type, data) as unknown as DetectorInput);
    script.set(s, list);
  };
  add(0, 'JobStarted', { mode: 'async', resumedFromStep: null, trainerMachines: machines / 4, rolloutMachines: (3 * machines) / 4 });
  for (const id of ids)
    add(0, 'MachineRegistered', { machineId: id, role: role.get(id)!, zone: 'az', hardwareClass: 'h100x8', gpus: 8, agentAddress: `${id}:1`, dpRank: 0 });
  const blindFrom = 150 + Math.floor(rnd() * 100);
  const blindTo = blindFrom + 5 + Math.floor(rnd() * 40);
  for (let s = 1; s <= seconds; s++) {
    if (s === blindFrom + 1) add(s, 'DetectionPaused', { reason: 'broker-unreachable', blindSince: iso(blindFrom), detail: 'spec' });
    if (s === blindTo + 1)
      add(s, 'DetectionResumed', { reason: 'broker-unreachable', blindSince: iso(blindFrom), resumedAt: iso(s), blindMs: (s - blindFrom) * 1000 });
    for (const id of ids) {
      const r = rnd();
      const mine = role.get(id)!;
      if (r < 0.002) add(s, 'AgentFaultSignalled', { machineId: id, role: mine, signal: 'process-exited', detail: 'spec', exitCode: 1, observedAt: iso(s) });
      else if (r < 0.004)
        add(s, 'MachineRegistered', { machineId: id, role: mine, zone: 'az', hardwareClass: 'h100x8', gpus: 8, agentAddress: `${id}:1`, dpRank: 0 });
      else if (r < 0.005) {
        const to: Role = mine === 'rollout' ? 'trainer' : 'rollout';
        role.set(id, to);
        add(s, 'MachineRoleChanged', { machineId: id, from: mine, to, reason: 'spec' });
      } else if (r < 0.0055) add(s, 'MachineDeregistered', { machineId: id, reason: 'spec' });
      else if (r < 0.015) quietUntil.set(id, s + Math.floor(rnd() * 80));
      else if (r < 0.02) {
        if (slow.has(id)) slow.delete(id);
        else slow.add(id);
      } else if (r < 0.04 && mine === 'trainer') {
        const phases = ['training', 'weight-update', 'training', 'checkpoint'] as const;
        add(s, 'RolePhaseChanged', { machineId: id, role: mine, phase: phases[Math.floor(rnd() * phases.length)], step: s, changedAt: iso(s) });
      }
      if ((quietUntil.get(id) ?? 0) > s || (s + ids.indexOf(id)) % 5 !== 0) continue;
      if (mine === 'trainer')
        add(s, 'GpuActivitySampled', { machineId: id, sampledAt: iso(s), intervalSeconds: 5, tensorActive: rnd() < 0.8 ? 0.7 : 0, source: 'emulated' });
      else {
        const waiting = rnd() < 0.2;
        add(s, 'RolloutThroughputSampled', {
          machineId: id,
          rolloutId: id,
          sampledAt: iso(s),
          windowSeconds: 5,
          tokensPerSecond: waiting ? 0 : slow.has(id) ? 50 + Math.floor(rnd() * 50) : 800 + Math.floor(rnd() * 400),
          completedRequests: waiting ? 0 : 2,
          inFlightRequests: 8,
          awaitingTools: waiting ? 8 : 0,
        });
      }
    }
  }
  return { script, seconds, msg, rnd };
}

/** Feeds a random job to `runs` step by step (same inputs, ticks every second); returns each run's outputs with their times. */
function drive(seed: number, runs: Run[], onSecond?: (s: number) => void) {
  const { script, seconds, msg, rnd } = randomJob(seed);
  const acks = new Map<number, DetectorInput[]>();
  for (let s = 0; s <= seconds; s++) {
    onSecond?.(s);
    const inputs = [...(script.get(s) ?? []), ...(acks.get(s) ?? [])];
    const steps: Step[] = [...inputs.map((input) => ({ s, input })), { s, tick: true as const }];
    for (const step of steps) {
      const outputs = runs.map((run) => (step.tick ? run.tick(at(s)) : run.observe(step.input!, at(s))));
      for (const d of outputs[0])
        if (d.type === 'HeartbeatProbeRequested' && rnd() < 0.5) {
          const data = (d as Draft<'HeartbeatProbeRequested'>).data;
          const when = s + 1 + Math.floor(rnd() * 7);
          const list = acks.get(when) ?? [];
          list.push(msg(when, 'HeartbeatAcked', { probeId: data.probeId, machineId: data.machineId, ackedAt: iso(when) }) as unknown as DetectorInput);
          acks.set(when, list);
        }
    }
  }
  return runs.map((run) => run.emitted.map((e) => ({ at: (e.now - at(0)) / 1000, output: e.output })));
}

const runOf = (decider: typeof indexed, jobId: string) => DeciderRun.for(decider, published(jobId)).given();
type Run = ReturnType<typeof runOf>;

describe('detector at scale: the due-deadline index', () => {
  it.each([1, 2, 3, 4, 5, 6])('decides exactly as evaluating every machine on every tick (random job %i)', (seed) => {
    const [fast, reference] = drive(seed, [runOf(indexed, `job-${seed}`), runOf(everyTick, `job-${seed}`)]);
    expect(reference.length).toBeGreaterThan(10);
    expect(new Set(reference.map((e) => e.output.type)).size).toBeGreaterThanOrEqual(3);
    expect(fast).toEqual(reference);
  });

  it('a tick evaluates the machines due, not every machine', () => {
    const evaluated: string[] = [];
    const counting = createDetectorDecider({
      defaults: FAST,
      rules: DEFAULT_DETECTION_RULES.map(
        (r) => ({ ...r, evaluate: (state: unknown, ctx) => (evaluated.push(ctx.machine.machineId), r.evaluate(state, ctx)) }) as DetectionRule,
      ),
    });
    const msg = timeline('due');
    const run = DeciderRun.for(counting, published('due')).given();
    const ids = Array.from({ length: 200 }, (_, i) => `rollout-${i}`);
    for (const id of ids)
      run.observe(
        msg(0, 'MachineRegistered', {
          machineId: id,
          role: 'rollout',
          zone: 'az',
          hardwareClass: 'h100x8',
          gpus: 8,
          agentAddress: 'a:1',
          dpRank: 0,
        }) as DetectorInput,
        at(0),
      );
    evaluated.length = 0;
    for (let s = 1; s < 20; s++) run.tick(at(s));
    expect(evaluated).toEqual([]); // nobody silent for 20 s yet: nothing due
    run.tick(at(20));
    expect(new Set(evaluated).size).toBe(200); // all registered at 0: all due at 20, each probed
    expect(run.state.index.deadlines.due(at(21))).toEqual([]); // suspected: only the probes' timeouts remain
    expect(run.state.index.deadlines.dueAt('rollout-0')).toBe(at(25));
  });
});

describe('detector at scale: snapshots', () => {
  it('encode → JSON → decode behaves as the state it was taken from (same outputs for the same later inputs and ticks)', () => {
    const codec = codecOf(indexed);
    const original = runOf(indexed, 'job-7');
    let restored: Run | null = null;
    let outputsBefore = 0;
    // Drive both: the original all along; at 200 s a copy restored from its snapshot joins.
    const shadow = runOf(indexed, 'job-7');
    drive(7, [original, shadow], (s) => {
      if (s !== 200) return;
      const snapshot = JSON.parse(JSON.stringify(codec.encode(shadow.state))) as unknown;
      expect(JSON.stringify(snapshot)).not.toContain('deadlines');
      shadow.state = codec.decode(snapshot);
      restored = shadow;
      outputsBefore = shadow.emitted.length;
    });
    expect(restored).not.toBeNull();
    expect(original.emitted.length).toBeGreaterThan(outputsBefore);
    expect(shadow.emitted.map((e) => [e.now, e.output])).toEqual(original.emitted.map((e) => [e.now, e.output]));
  });

  it('the default codec refuses the state with its index in it (the decider names its own)', () => {
    expect(() => codecOf({}).encode(indexed.initialState())).toThrow(/index.*DetectorIndex/);
  });
});

describe('detector at scale: sample folding does not depend on its order with the facts around it', () => {
  const register = (msg: ReturnType<typeof timeline>, s: number, id: string, role: Role = 'rollout') =>
    msg(s, 'MachineRegistered', { machineId: id, role, zone: 'az', hardwareClass: 'h100x8', gpus: 8, agentAddress: 'a:1', dpRank: 0 }) as DetectorInput;
  const sample = (msg: ReturnType<typeof timeline>, s: number, id: string, tokensPerSecond: number) =>
    msg(s, 'RolloutThroughputSampled', {
      machineId: id,
      rolloutId: id,
      sampledAt: iso(s),
      windowSeconds: 5,
      tokensPerSecond,
      completedRequests: tokensPerSecond > 0 ? 1 : 0,
      inFlightRequests: 8,
      awaitingTools: 0,
    }) as DetectorInput;
  const gpu = (msg: ReturnType<typeof timeline>, s: number, id: string) =>
    msg(s, 'GpuActivitySampled', { machineId: id, sampledAt: iso(s), intervalSeconds: 5, tensorActive: 0.7, source: 'emulated' }) as DetectorInput;
  const phase = (msg: ReturnType<typeof timeline>, s: number, id: string, p: 'training' | 'checkpoint') =>
    msg(s, 'RolePhaseChanged', { machineId: id, role: 'trainer', phase: p, step: 1, changedAt: iso(s) }) as DetectorInput;

  /** Runs `inputs` (each observed at its own time, in the order given), ticking every second to `until`; the outputs' types, machines and times. */
  function verdicts(inputs: (msg: ReturnType<typeof timeline>) => DetectorInput[], until: number) {
    const msg = timeline('order');
    const run = DeciderRun.for(createDetectorDecider({ defaults: FAST }), published('order')).given();
    const queue = inputs(msg);
    let s = 0;
    for (; s <= until; s++) {
      while (queue.length > 0 && Date.parse(queue[0].occurredAt) <= at(s)) {
        const input = queue.shift()!;
        run.observe(input, at(s));
      }
      run.tick(at(s));
    }
    return run.emitted.map((e) => `${(e.now - at(0)) / 1000}s ${e.output.type} ${(e.output.data as { machineId: string }).machineId}`);
  }

  it('a rollout sample read again after the re-registration that followed it does not make the new incarnation silent', () => {
    // In order: sample at 10, re-registration at 12. Refolded after a restart: the registration, then the sample.
    const inOrder = verdicts((msg) => [register(msg, 0, 'r'), sample(msg, 10, 'r', 900), register(msg, 12, 'r')], 60);
    const late = verdicts((msg) => [register(msg, 0, 'r'), register(msg, 12, 'r'), { ...sample(msg, 10, 'r', 900), occurredAt: iso(10) }], 60);
    expect(inOrder).toEqual(['32s FaultSuspected r', '32s HeartbeatProbeRequested r', '37s FaultConfirmed r']);
    expect(late).toEqual(inOrder);
  });

  it('a zero sample older than a newer one does not move the silence back', () => {
    const inOrder = verdicts((msg) => [register(msg, 0, 'r'), sample(msg, 5, 'r', 0), sample(msg, 15, 'r', 900)], 60);
    const late = verdicts((msg) => [register(msg, 0, 'r'), sample(msg, 15, 'r', 900), sample(msg, 5, 'r', 0)], 60);
    expect(inOrder[0]).toBe('35s FaultSuspected r');
    expect(late).toEqual(inOrder);
  });

  it('a rollout sample read again after the verdict that followed it keeps the verdict and its timing', () => {
    // rollout-0 goes silent at 0; its last sample (at 30, zero) is read again after the verdict (at 25).
    const inOrder = verdicts((msg) => [register(msg, 0, 'r'), sample(msg, 19, 'r', 0), sample(msg, 30, 'r', 0), register(msg, 40, 'r')], 90);
    const late = verdicts((msg) => [register(msg, 0, 'r'), sample(msg, 19, 'r', 0), register(msg, 40, 'r'), sample(msg, 30, 'r', 0)], 90);
    expect(inOrder.slice(0, 3)).toEqual(['20s FaultSuspected r', '20s HeartbeatProbeRequested r', '25s FaultConfirmed r']);
    expect(late).toEqual(inOrder);
  });

  it('a trainer activity sample read again after the re-arm (or training phase) that followed it does not make the trainer idle for longer', () => {
    // Verdict at 40 (idle from 0 in training); the restarted trainer reports a phase at 50 (re-armed) and
    // training at 60; an activity sample from 45 (before the re-arm) is read again after them.
    const facts = (msg: ReturnType<typeof timeline>) => [register(msg, 0, 't', 'trainer'), phase(msg, 0, 't', 'training')];
    const inOrder = verdicts((msg) => [...facts(msg), gpu(msg, 45, 't'), phase(msg, 50, 't', 'checkpoint'), phase(msg, 60, 't', 'training')], 130);
    const late = verdicts(
      (msg) => [...facts(msg), phase(msg, 50, 't', 'checkpoint'), phase(msg, 60, 't', 'training'), { ...gpu(msg, 45, 't'), occurredAt: iso(45) }],
      130,
    );
    expect(inOrder).toEqual(['40s FaultConfirmed t', '100s FaultConfirmed t']);
    expect(late).toEqual(inOrder);
    // Inside one training phase: activity at 70 read after the phase entered at 75 clears no more than the phase start.
    const phaseThenOld = verdicts(
      (msg) => [
        ...facts(msg),
        gpu(msg, 30, 't'),
        phase(msg, 60, 't', 'checkpoint'),
        phase(msg, 75, 't', 'training'),
        { ...gpu(msg, 70, 't'), occurredAt: iso(70) },
      ],
      130,
    );
    expect(phaseThenOld).toEqual(['115s FaultConfirmed t']);
  });
});

describe('RankedValues: the peer median without sorting', () => {
  it('agrees with sorting on random updates, with any one key left out', () => {
    const rnd = prng(42);
    const ranked = new RankedValues();
    const plain = new Map<string, number>();
    const median = (values: number[]) => {
      const sorted = [...values].sort((a, b) => a - b);
      const mid = Math.floor(sorted.length / 2);
      return sorted.length === 0 ? NaN : sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
    };
    for (let i = 0; i < 3000; i++) {
      const key = `m-${Math.floor(rnd() * 60)}`;
      const value = rnd() < 0.2 ? null : Math.floor(rnd() * 20) * 10.5; // ties on purpose
      ranked.set(key, value);
      if (value === null) plain.delete(key);
      else plain.set(key, value);
      const without = `m-${Math.floor(rnd() * 60)}`;
      const others = [...plain].filter(([k]) => k !== without).map(([, v]) => v);
      expect(ranked.countWithout(without)).toBe(others.length);
      expect(ranked.medianWithout(without)).toEqual(median(others));
    }
  });
});

// Type-only check that the message helpers line up with the inputs (keeps the casts above honest).
export type _Inputs = MessageOf<'RolloutThroughputSampled'> extends DetectorInput ? true : never;
