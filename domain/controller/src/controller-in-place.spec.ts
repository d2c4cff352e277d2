import { Draft, Role } from '@robustrl/contracts';
import { codecOf, step } from '@robustrl/domain-kit';
import { at, timeline } from '@robustrl/testing/job-timeline';
import { createControllerDecider } from './controller.decider';
import { ControllerData, ControllerEvent, ControllerInput, ControllerSettings, ControllerState, rebuildControllerIndex } from './controller.state';
import { createControllerDecider as createFullRecompute } from '../test/full-recompute/controller.decider';
import { prng } from '@robustrl/testing/seeded-random';

/**
 * At scale: the controller evolves in place and keeps its unfinished recoveries indexed. These
 * specs hold it to the controller as it was (`domain/controller/test/full-recompute/`: every fold a new state, every decision
 * a walk over every recovery) on random jobs: the same drafts for every input, the same facts after,
 * an index equal to one rebuilt from the facts, and a snapshot that decodes to a controller deciding
 * the same.
 */

type Options = { mode: 'sync' | 'semi-sync' | 'async'; policy: ControllerSettings['policy'] };

/**
 * One random job, driven through both controllers: machines register (some only after a verdict about
 * them), change role and leave; steps and checkpoints go by; faults are confirmed on trainers and
 * rollouts, with or without hardware evidence, some of them notices with a deadline; commands succeed per machine or at once, fail, or get no
 * answer until a tick times them out; restarted machines report in; inputs are redelivered; once in a
 * while an input is only folded (a history), not decided on.
 */
function randomJob(seed: number, options: Options, inputs = 500) {
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]): T | undefined => (xs.length ? xs[Math.floor(rnd() * xs.length)] : undefined);
  const msg = timeline(`job-controller-${seed}`);
  const settings = { commandTimeoutMs: 40_000, policy: options.policy };
  const decider = createControllerDecider(settings);
  const reference = createFullRecompute(settings);
  let state: ControllerState = decider.initialState();
  let expected: ControllerData = reference.initialState();
  let t = 0;
  let fresh = 0;
  let step_ = 0;
  const sent: ControllerInput[] = [];
  const mismatches: string[] = [];
  const trainerRole: Role = options.mode === 'sync' ? 'hybrid' : 'trainer';
  const zones = ['az-1', 'az-2'];

  const register = (machineId: string, role: Role) =>
    msg(t, 'MachineRegistered', {
      machineId,
      role,
      zone: rnd() < 0.8 ? 'az-1' : pick(zones)!,
      hardwareClass: 'h100x8',
      gpus: 8,
      agentAddress: `${machineId}:7070`,
      dpRank: 0,
      ...(rnd() < 0.7 ? { incarnation: `${machineId}@${t}` } : {}),
    });
  const fault = (machineId: string, role: Role, handledAs: 'trainer' | 'rollout') =>
    msg(t, 'FaultConfirmed', {
      verdictId: `${machineId}/v${t}`,
      machineId,
      role,
      rule: 'explicit-signal',
      handledAs,
      machineFaulty: rnd() < 0.4,
      detectionLatencyMs: Math.floor(rnd() * 5000),
      // Some are notices: the machine leaves within a minute and a half (a trainer's group may wait for its checkpoint).
      evidence: rnd() < 0.3 ? { signal: 'node-draining', departsAt: new Date(at(t + Math.floor(rnd() * 90))).toISOString() } : { signal: 'process-exited' },
    });

  const next = (): ControllerInput | 'tick' => {
    const r = rnd();
    const machines = Object.values(expected.machines);
    const open = Object.values(expected.recoveries).filter((x) => !x.done);
    const pending = open.flatMap((x) => Object.values(x.commands).filter((c) => c.status === 'pending'));
    // A departing trainer's group waits for the step's checkpoint: it often comes in time.
    if (open.some((x) => x.handover?.status === 'waiting') && rnd() < 0.04)
      return msg(t, 'CheckpointSaved', { step: step_, uri: `file:///ckpt/${step_}`, blockingMs: 10 });
    if (r < 0.25 && pending.length > 0) {
      const c = pick(pending)!;
      const recoveryId = c.commandId.slice(0, c.commandId.lastIndexOf('/'));
      const machineId = c.awaiting.length > 0 && rnd() < 0.8 ? pick(c.awaiting)! : null;
      const base = { recoveryId, commandId: c.commandId, machineId, executor: 'spec', durationMs: 1000 };
      if (rnd() < 0.2) return msg(t, 'RecoveryCommandFailed', { ...base, error: 'could not start' });
      const newMachineId = c.type === 'ReplaceMachine' ? (rnd() < 0.3 ? pick(machines)?.machineId : `new-${fresh++}`) : undefined;
      return msg(t, 'RecoveryCommandSucceeded', { ...base, ...(newMachineId ? { newMachineId } : {}) });
    }
    if (r < 0.45) {
      // A life sign, mostly from a machine an open recovery waits for.
      const waitedFor = open.flatMap((x) => Object.keys(x.restartedMachines));
      const machineId = rnd() < 0.8 && waitedFor.length > 0 ? pick(waitedFor)! : pick(machines)?.machineId;
      if (machineId) {
        if (rnd() < 0.25) return register(machineId, expected.machines[machineId]?.role ?? 'rollout');
        return msg(t, 'RolePhaseChanged', { machineId, role: 'trainer', phase: 'initializing', step: step_, changedAt: new Date(at(t)).toISOString() });
      }
    }
    if (r < 0.55) {
      const m = pick(machines.filter((x) => x.role === 'rollout'));
      if (m)
        return msg(t, 'RolloutThroughputSampled', {
          machineId: m.machineId,
          rolloutId: m.machineId,
          sampledAt: new Date(at(t)).toISOString(),
          windowSeconds: 1,
          tokensPerSecond: 100,
          completedRequests: 1,
          inFlightRequests: Math.floor(rnd() * 4),
          awaitingTools: 0,
        });
    }
    if (r < 0.6) return msg(t, 'TrainingStepStarted', { step: ++step_, batchId: `b${step_}`, startedAt: new Date(at(t)).toISOString() });
    if (r < 0.64) return msg(t, 'TrainingStepCompleted', { step: step_, batchId: `b${step_}`, durationMs: 1000 });
    if (r < 0.66) return msg(t, 'CheckpointSaved', { step: step_, uri: `file:///ckpt/${step_}`, blockingMs: 10 });
    if (r < 0.78) {
      // A fault: on a known machine, or on one whose registration it overtakes.
      if (rnd() < 0.1) return fault(`unknown-${fresh++}`, rnd() < 0.5 ? trainerRole : 'rollout', rnd() < 0.5 ? 'trainer' : 'rollout');
      const m = pick(machines.filter((x) => x.status === 'active'));
      if (m) return fault(m.machineId, m.role, m.role === 'rollout' ? 'rollout' : 'trainer');
    }
    if (r < 0.8) {
      const m = pick(machines);
      if (m) return register(m.machineId, m.role === 'rollout' ? trainerRole : 'rollout');
    }
    if (r < 0.82) {
      const m = pick(machines);
      if (m) return msg(t, 'MachineRoleChanged', { machineId: m.machineId, from: m.role, to: m.role === 'rollout' ? 'trainer' : 'rollout', reason: 'lent' });
    }
    if (r < 0.83) {
      const m = pick(machines);
      if (m) return msg(t, 'MachineDeregistered', { machineId: m.machineId, reason: 'replaced' });
    }
    if (r < 0.9 && sent.length > 0) return pick(sent)!;
    return 'tick';
  };

  const history: ControllerInput[] = [msg(0, 'JobStarted', { mode: options.mode, resumedFromStep: null, trainerMachines: 3, rolloutMachines: 5 })];
  for (let i = 0; i < 3; i++) history.push(register(`trainer-${i}`, trainerRole));
  if (options.mode !== 'sync') for (let i = 0; i < 5; i++) history.push(register(`rollout-${i}`, 'rollout'));
  for (const e of history) {
    state = decider.evolve(state, e);
    expected = reference.evolve(expected, e);
  }
  const toEvent = envelope(msg, () => t);

  for (let i = 0; i < inputs; i++) {
    t += 1 + Math.floor(rnd() * 4);
    const input = next();
    const command = input === 'tick' ? { kind: 'tick' as const, now: at(t) } : { kind: 'observe' as const, message: input, now: at(t) };
    if (input !== 'tick') sent.push(input);
    if (input !== 'tick' && rnd() < 0.05) {
      // Only folded (a history the controller did not decide on): both must catch up at the next input.
      state = decider.evolve(state, input);
      expected = reference.evolve(expected, input);
      continue;
    }
    const want = step(reference, expected, command, toEvent);
    const got = step(decider, state, command, toEvent);
    expected = want.state;
    state = got.state;
    const what = input === 'tick' ? 'tick' : input.type;
    if (JSON.stringify(got.outputs) !== JSON.stringify(want.outputs)) mismatches.push(`#${i} ${what}: got ${show(got.outputs)}, want ${show(want.outputs)}`);
    if (JSON.stringify(sortKeys(facts(state))) !== JSON.stringify(sortKeys(expected))) mismatches.push(`#${i} ${what}: the facts differ`);
    const rebuilt = rebuildControllerIndex(structuredClone(facts(state))).index;
    // In order: the open recoveries are walked oldest first, as the recovery table is.
    if (JSON.stringify([...state.index.open]) !== JSON.stringify([...rebuilt.open]))
      mismatches.push(`#${i} ${what}: open recoveries ${JSON.stringify([...state.index.open])}, rebuilt ${JSON.stringify([...rebuilt.open])}`);
    if (mismatches.length > 0) break;
  }
  return { decider, state, mismatches, msg, t, stats: statsOf(expected) };
}

/**
 * The host's envelope, without the contract's validation: a random job can take every trainer out of
 * the roster and then restart an empty group, which both controllers decide alike but no schema allows.
 */
function envelope(msg: ReturnType<typeof timeline>, now: () => number) {
  return (d: Draft) =>
    ({
      ...msg(now(), 'TrainingStepStarted', { step: 0, batchId: 'b', startedAt: new Date(at(now())).toISOString() }),
      type: d.type,
      data: d.data,
    }) as ControllerEvent;
}

const show = (ds: Draft[]) => ds.map((d) => `${d.type}${JSON.stringify(d.data)}`).join(' ');
const facts = ({ index: _derived, ...data }: ControllerState): ControllerData => data;

/** What a random job went through, so the specs can tell it exercised the interesting paths. */
function statsOf(data: ControllerData) {
  const recoveries = Object.values(data.recoveries);
  const commands = recoveries.flatMap((r) => Object.values(r.commands));
  return {
    actions: new Set(recoveries.map((r) => r.action)),
    handovers: new Set(recoveries.flatMap((r) => (r.handover ? [r.handover.status] : []))),
    completed: recoveries.filter((r) => r.done && r.action !== 'report-only').length,
    failed: commands.filter((c) => c.status === 'failed').length,
    reportedIn: recoveries.filter((r) => Object.keys(r.reportedIn).length > 0).length,
  };
}

function sortKeys(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(sortKeys);
  if (x && typeof x === 'object')
    return Object.fromEntries(
      Object.keys(x)
        .sort()
        .map((k) => [k, sortKeys((x as Record<string, unknown>)[k])]),
    );
  return x;
}

describe('controller in place: decides as the full recomputation did', () => {
  it.each([
    [1, { mode: 'semi-sync', policy: 'role-based' }],
    [2, { mode: 'async', policy: 'role-based' }],
    [3, { mode: 'sync', policy: 'role-based' }],
    [4, { mode: 'semi-sync', policy: 'task-restart' }],
    [5, { mode: 'semi-sync', policy: 'role-based' }],
    [6, { mode: 'async', policy: 'role-based' }],
    [7, { mode: 'sync', policy: 'role-based' }],
    [8, { mode: 'semi-sync', policy: 'role-based' }],
  ] as Array<[number, Options]>)('seed %i %j: same drafts, same facts, open recoveries equal to a rebuild after every input', (seed, options) => {
    const { mismatches, stats } = randomJob(seed, options);
    expect(mismatches).toEqual([]);
    // The job went through recoveries that completed, failed commands and machines reporting in.
    expect(stats.completed).toBeGreaterThan(0);
    expect(stats.failed).toBeGreaterThan(0);
    if (options.policy === 'role-based') expect(stats.reportedIn).toBeGreaterThan(0);
  });

  it('the random jobs reach every kind of recovery', () => {
    const actions = new Set<string>();
    const handovers = new Set<string>();
    for (const seed of [1, 2, 3, 5, 6, 7, 8]) {
      const { stats } = randomJob(seed, { mode: seed % 3 === 0 ? 'sync' : 'semi-sync', policy: 'role-based' });
      for (const a of stats.actions) actions.add(a);
      for (const h of stats.handovers) handovers.add(h);
    }
    // Departing trainers whose group moved at the checkpoint, and whose wait ran out or ended with a fault.
    expect([...handovers].sort()).toEqual(expect.arrayContaining(['given-up', 'saved']));
    expect([...actions].sort()).toEqual([
      'replace-rollout',
      'report-only',
      'request-new-trainer-machine',
      'restart-rollout-engine',
      'restart-task',
      'restart-trainer-group',
      'warm-standby-from-rollout',
    ]);
  });

  it('a snapshot (index left out, rebuilt on decode) decides as the state it was taken from', () => {
    for (const seed of [11, 12, 13]) {
      const { decider, state, msg, t } = randomJob(seed, { mode: 'semi-sync', policy: 'role-based' }, 300);
      const codec = codecOf(decider);
      const encoded = JSON.parse(JSON.stringify(codec.encode(state)));
      expect(encoded.index).toBeUndefined();
      const decoded = codec.decode(encoded);
      expect([...decoded.index.open]).toEqual([...state.index.open]);
      expect(sortKeys(facts(decoded))).toEqual(sortKeys(facts(state)));
      // Both copies decide alike on what comes next: a fault on a trainer, then a tick past every timeout.
      const next: ControllerInput = msg(t + 1, 'FaultConfirmed', {
        verdictId: 'trainer-0/snapshot',
        machineId: 'trainer-0',
        role: 'trainer',
        rule: 'explicit-signal',
        handledAs: 'trainer',
        machineFaulty: true,
        detectionLatencyMs: 0,
        evidence: {},
      });
      for (const command of [
        { kind: 'observe' as const, message: next, now: at(t + 1) },
        { kind: 'tick' as const, now: at(t + 100) },
      ]) {
        const toEvent = envelope(msg, () => t + 2);
        const a = step(decider, state, command, toEvent).outputs;
        const b = step(decider, decoded, command, toEvent).outputs;
        expect(b).toEqual(a);
        if (command.kind === 'observe') expect(a.length).toBeGreaterThan(0);
      }
    }
  });
});
