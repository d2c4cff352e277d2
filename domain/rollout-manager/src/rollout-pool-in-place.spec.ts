import { Draft } from '@robustrl/contracts';
import { codecOf, step } from '@robustrl/domain-kit';
import { at, timeline } from '@robustrl/testing/job-timeline';
import { createRolloutPoolDecider } from './rollout-pool.decider';
import { RolloutPoolEvent, RolloutPoolInput, RolloutPoolState } from './rollout-pool.state';
import { createRolloutPoolDecider as createFullRecompute } from '../test/full-recompute/rollout-pool.decider';
import type { RolloutPoolState as ReferenceState } from '../test/full-recompute/rollout-pool.state';
import { prng } from '@robustrl/testing/seeded-random';

/**
 * At scale: the rollout pool evolves in place. These specs hold it to the pool as it was
 * (`domain/rollout-manager/test/full-recompute/`: every fold a new state) on random jobs: the same drafts for every input and the
 * same facts after it, and a snapshot that decodes to a pool deciding the same.
 */

/**
 * One random job through both pools: rollout machines (one or two instances each) register, with or
 * without a weight server, report throughput and weight versions, the trainer publishes versions, generate trajectories turn by turn and finish them; machines fail
 * (as rollouts or trainers), leave, are lent to the trainer or change role, and join again; inputs are
 * redelivered; once in a while an input is only folded (a history), not decided on.
 */
function randomJob(seed: number, inputs = 600) {
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]): T | undefined => (xs.length ? xs[Math.floor(rnd() * xs.length)] : undefined);
  const msg = timeline(`job-pool-${seed}`);
  const decider = createRolloutPoolDecider();
  const reference = createFullRecompute();
  let state: RolloutPoolState = decider.initialState();
  let expected: ReferenceState = reference.initialState();
  let t = 0;
  let fresh = 0;
  let turnNo = 0;
  const machines: string[] = [];
  const trajectories: string[] = [];
  const sent: RolloutPoolInput[] = [];
  const mismatches: string[] = [];
  let reassigned = 0;
  let orphaned = 0;

  const instanceOf = (machineId: string) => (rnd() < 0.5 ? machineId : `${machineId}/dp${Math.floor(rnd() * 2)}`);
  const register = (machineId: string, role: 'rollout' | 'trainer' = 'rollout') =>
    msg(t, 'MachineRegistered', {
      machineId,
      role,
      zone: 'az-1',
      hardwareClass: 'h100x8',
      gpus: 8,
      agentAddress: `${machineId}:8086`,
      dpRank: 0,
      // Half take part in weight transfer: they take work only once they hold weights.
      ...(rnd() < 0.5 ? { weightsAddress: `${machineId}:13337`, inferenceUrl: `http://${machineId}:8000` } : {}),
    });
  const ref = (trajectoryId: string) => ({ trajectoryId, batchId: 'b', step: 1, promptId: trajectoryId.split('/')[0], sampleIndex: 0 });

  const next = (): RolloutPoolInput => {
    const r = rnd();
    if (r < 0.06 || machines.length < 2) {
      const machineId = rnd() < 0.4 && machines.length > 0 ? pick(machines)! : `r-${fresh++}`;
      if (!machines.includes(machineId)) machines.push(machineId);
      return register(machineId, rnd() < 0.1 ? 'trainer' : 'rollout');
    }
    if (r < 0.12) {
      const machineId = pick(machines)!;
      return msg(t, 'RolloutThroughputSampled', {
        machineId,
        rolloutId: instanceOf(machineId),
        sampledAt: new Date(at(t)).toISOString(),
        windowSeconds: 10,
        tokensPerSecond: 1,
        completedRequests: 0,
        inFlightRequests: 1,
        awaitingTools: 0,
      });
    }
    if (r < 0.135) return msg(t, 'WeightVersionPublished', { version: Math.floor(rnd() * 6), step: 1, buckets: [], totalBytes: 0, sources: [] });
    if (r < 0.17) return msg(t, 'RelayJoined', { instanceId: instanceOf(pick(machines)!), version: Math.floor(rnd() * 6), address: 'x' });
    if (r < 0.5) {
      const trajectoryId = rnd() < 0.7 && trajectories.length > 0 ? pick(trajectories)! : `p${fresh++}/0`;
      if (!trajectories.includes(trajectoryId)) trajectories.push(trajectoryId);
      const modelOutput = rnd() < 0.6;
      return msg(t, 'TrajectoryTurnAppended', {
        ...ref(trajectoryId),
        turnId: `${trajectoryId}#${++turnNo}`,
        turnIndex: Math.floor(rnd() * 8),
        kind: modelOutput ? 'model-output' : pick(['tool-call', 'tool-result'] as const)!,
        rolloutId: modelOutput ? instanceOf(pick(machines)!) : null,
        weightVersion: 1,
        tokens: 10,
      });
    }
    if (r < 0.62 && trajectories.length > 0) {
      const trajectoryId = pick(trajectories)!;
      const status = pick(['completed', 'completed', 'aborted', 'in-flight', 'reassigned'] as const)!;
      if (status === 'completed' || status === 'aborted') trajectories.splice(trajectories.indexOf(trajectoryId), 1);
      return msg(t, 'TrajectoryStatusChanged', { ...ref(trajectoryId), status });
    }
    if (r < 0.72) {
      const machineId = rnd() < 0.95 ? pick(machines)! : `unknown-${fresh++}`;
      const asRollout = rnd() < 0.8;
      return msg(t, 'FaultConfirmed', {
        verdictId: `${machineId}/v${fresh++}`,
        machineId,
        role: asRollout ? 'rollout' : 'trainer',
        rule: 'rollout-silent',
        handledAs: asRollout || rnd() < 0.3 ? 'rollout' : 'trainer',
        machineFaulty: true,
        detectionLatencyMs: 1000,
        // A notice's verdict now and then: the machine's departure is kept with it.
        evidence: rnd() < 0.3 ? { signal: 'node-draining', departsAt: new Date(t + 30_000).toISOString() } : {},
      });
    }
    if (r < 0.75) return msg(t, 'MachineDeregistered', { machineId: pick(machines)!, reason: 'replaced' });
    if (r < 0.79)
      return msg(t, 'PromoteRolloutToTrainer', {
        recoveryId: 'x/recovery',
        commandId: `x/recovery/${fresh++}`,
        rolloutMachineId: pick(machines)!,
        replacesMachineId: 'trainer-0',
      });
    if (r < 0.82) {
      const from = pick(['rollout', 'rollout', 'trainer'] as const)!;
      return msg(t, 'MachineRoleChanged', {
        machineId: pick(machines)!,
        from,
        to: from === 'rollout' ? pick(['trainer', 'rollout'] as const)! : 'rollout',
        reason: 'spec',
      });
    }
    if (sent.length > 0) return pick(sent)!;
    return register(`r-${fresh++}`);
  };

  for (let i = 0; i < inputs; i++) {
    t += Math.floor(rnd() * 3);
    const input = next();
    sent.push(input);
    if (rnd() < 0.05) {
      // Only folded (a history the pool did not decide on): both must catch up at the next input.
      state = decider.evolve(state, input);
      expected = reference.evolve(expected, input);
      continue;
    }
    const command = { kind: 'observe' as const, message: input, now: at(t) };
    const toEvent = envelope(msg, t);
    const want = step(reference, expected, command, toEvent);
    const got = step(decider, state, command, toEvent);
    expected = want.state;
    state = got.state;
    reassigned += got.outputs.length;
    orphaned = Math.max(orphaned, state.orphans.length);
    if (JSON.stringify(got.outputs) !== JSON.stringify(want.outputs))
      mismatches.push(`#${i} ${input.type}: got ${show(got.outputs)}, want ${show(want.outputs)}`);
    if (JSON.stringify(facts(state)) !== JSON.stringify(expected)) mismatches.push(`#${i} ${input.type}: the facts differ`);
    if (mismatches.length > 0) break;
  }
  return { decider, state, mismatches, msg, t, reassigned, orphaned, machines };
}

/** The host's envelope, without the contract's validation (the spec's drafts are the pool's own). */
function envelope(msg: ReturnType<typeof timeline>, t: number) {
  return (d: Draft) =>
    ({
      ...msg(t, 'JobStarted', { mode: 'async', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 1 }),
      type: d.type,
      data: d.data,
    }) as RolloutPoolEvent;
}

const show = (ds: Draft[]) => ds.map((d) => `${d.type}${JSON.stringify(d.data)}`).join(' ');
const facts = ({ stoppedServing: _transient, ...data }: RolloutPoolState): ReferenceState => data;

describe('rollout pool in place: decides as the copying pool did', () => {
  it.each(Array.from({ length: 12 }, (_, i) => i + 1))('seed %i: same drafts and same facts after every input', (seed) => {
    const { mismatches } = randomJob(seed);
    expect(mismatches).toEqual([]);
  });

  it('the random jobs move trajectories and leave some waiting as orphans', () => {
    let reassigned = 0;
    let orphaned = 0;
    for (let seed = 1; seed <= 12; seed++) {
      const job = randomJob(seed);
      reassigned += job.reassigned;
      orphaned += job.orphaned;
    }
    expect(reassigned).toBeGreaterThan(10);
    expect(orphaned).toBeGreaterThan(0);
  });

  it('a snapshot decides as the state it was taken from', () => {
    for (const seed of [21, 22, 23]) {
      const { decider, state, msg, t, machines } = randomJob(seed, 300);
      const codec = codecOf(decider);
      const decoded = codec.decode(JSON.parse(JSON.stringify(codec.encode(state))));
      expect(facts(decoded)).toEqual(facts(state));
      const fault = msg(t + 1, 'MachineDeregistered', { machineId: machines[0], reason: 'snapshot' });
      const command = { kind: 'observe' as const, message: fault, now: at(t + 1) };
      const toEvent = envelope(msg, t + 1);
      expect(step(decider, decoded, command, toEvent).outputs).toEqual(step(decider, state, command, toEvent).outputs);
    }
  });
});
