import { Draft } from '@robustrl/contracts';
import { foldInput } from '@robustrl/domain-kit';
import { timeline } from '@robustrl/testing/job-timeline';
import { createWeightRegistryDecider } from './weight-registry.decider';
import {
  holdsBucket,
  holdsWhole,
  isTrainerSource,
  liveRollouts,
  targetVersion,
  WeightRegistryEvent,
  WeightRegistryInput,
  WeightRegistryState,
} from './weight-registry.state';
import { prng } from '@robustrl/testing/seeded-random';

const TRAINER_RANKS = ['trainer-0/dp0', 'trainer-0/dp1'];

/**
 * A seeded simulation of one job's weight updates: pulls complete in random order, some fail (source
 * blamed, or checksum), rollouts die and new ones register, new versions are published. After every
 * decision the invariants of paper §5.2.1/§5.2.2 are checked against the state.
 */
function simulate(seed: number, window: number, shards = 1) {
  const msg = timeline(`job-sim-${seed}`);
  const rnd = prng(seed);
  const pick = <T>(xs: T[]) => xs[Math.floor(rnd() * xs.length)];
  const D = createWeightRegistryDecider({ pullWindow: window, retainVersions: 2 });
  let state: WeightRegistryState = D.initialState();
  let t = 0;
  let nextRollout = 0;
  let version = 0;
  let trainerFaults = 0;
  const assignments: Draft[] = [];
  const violations: string[] = [];

  const send = (m: WeightRegistryInput) => {
    // As the kit's step does for an in-place decider: fold the input, decide, fold the drafts one by one.
    const command = { kind: 'observe' as const, message: m, now: Date.parse(m.occurredAt) };
    let s = foldInput(D, state, command);
    const out = D.decide(command, s);
    for (const d of out) {
      if (d.type === 'WeightPullAssigned') {
        const { pullerId, sourceId, version: v, bucketIndex, shard = 0 } = d.data;
        // Never fetch again what the puller holds; only assign from a source that has the bucket.
        if (holdsBucket(s, pullerId, v, bucketIndex, shard)) violations.push(`${d.data.pullId}: ${pullerId} already holds it`);
        if (!isTrainerSource(s.versions[v], sourceId, shard) && !holdsBucket(s, sourceId, v, bucketIndex, shard))
          violations.push(`${d.data.pullId}: ${sourceId} does not hold it`);
        assignments.push(d);
      }
      s = D.evolve(s, msg(t, d.type, d.data as never) as WeightRegistryEvent);
    }
    state = s;
    check();
    // Redelivery decides nothing.
    const again = D.decide({ kind: 'observe', message: m, now: Date.parse(m.occurredAt) }, state);
    if (again.length > 0) violations.push(`redelivered ${m.type} decided ${again.map((x) => x.type).join(',')}`);
  };

  const check = () => {
    const serving = new Set<string>();
    const perPuller = new Map<string, number>();
    for (const p of Object.values(state.pulls)) {
      const key = `${p.sourceId}|${p.version}|${p.shard ?? 0}|${p.bucketIndex}`;
      // THE invariant: at any moment a source serves a given bucket to at most one puller (paper §5.2.1 ➁).
      if (serving.has(key)) violations.push(`two pulls of ${key} at once`);
      serving.add(key);
      perPuller.set(p.pullerId, (perPuller.get(p.pullerId) ?? 0) + 1);
      if (!liveRollouts(state).includes(p.pullerId)) violations.push(`${p.pullId}: puller ${p.pullerId} not serving`);
    }
    for (const [puller, n] of perPuller) if (n > window) violations.push(`${puller} has ${n} pulls in flight (window ${window})`);
  };

  // With shards, each trainer rank publishes its own shard (DESIGN "Weights are named and sharded").
  const publish = () => {
    version += 1;
    for (let shard = 0; shard < shards; shard++) {
      const ranks = shards === 1 ? TRAINER_RANKS : [TRAINER_RANKS[shard % TRAINER_RANKS.length]];
      send(
        msg(++t, 'WeightVersionPublished', {
          version,
          step: version,
          buckets: Array.from({ length: 6 }, (_, index) => ({ index, sizeBytes: 100, checksum: `v${version}s${shard}b${index}` })),
          totalBytes: 600,
          sources: ranks.map((instanceId) => ({ instanceId, address: `${instanceId}:7000` })),
          ...(shards > 1 ? { shard: { index: shard, count: shards } } : {}),
        }),
      );
    }
  };
  const register = () => {
    const machineId = `r-${nextRollout++}`;
    send(
      msg(++t, 'MachineRegistered', {
        machineId,
        role: 'rollout',
        zone: 'az',
        hardwareClass: 'h',
        gpus: 8,
        agentAddress: `http://${machineId}:8090`,
        dpRank: 0,
        weightsAddress: `${machineId}:9000`,
      }),
    );
  };

  send(
    msg(0, 'MachineRegistered', {
      machineId: 'trainer-0',
      role: 'trainer',
      zone: 'az',
      hardwareClass: 'h',
      gpus: 8,
      agentAddress: 'trainer-0:9000',
      dpRank: 0,
    }),
  );
  for (let i = 0; i < 8; i++) register();
  publish();

  for (let stepNo = 0; stepNo < 400; stepNo++) {
    const r = rnd();
    const inFlight = Object.values(state.pulls).sort((a, b) => a.pullId.localeCompare(b.pullId));
    if (r < 0.02) publish();
    else if (r < 0.025) {
      // The trainer group fails (paper §5.2.2): what no rollout holds whole is abandoned until republished.
      send(
        msg(++t, 'FaultConfirmed', {
          verdictId: `trainer/v${t}`,
          machineId: 'trainer-0',
          role: 'trainer',
          rule: 'trainer-idle',
          handledAs: 'trainer',
          machineFaulty: false,
          detectionLatencyMs: 1,
          evidence: {},
        }),
      );
      trainerFaults += 1;
    } else if (r < 0.05 && liveRollouts(state).length > 3) {
      const victim = pick(liveRollouts(state));
      send(
        msg(++t, 'FaultConfirmed', {
          verdictId: `${victim}/v`,
          machineId: victim,
          role: 'rollout',
          rule: 'rollout-silent',
          handledAs: 'rollout',
          machineFaulty: true,
          detectionLatencyMs: 1,
          evidence: {},
        }),
      );
    } else if (r < 0.07) register();
    else if (inFlight.length > 0) {
      const p = pick(inFlight);
      const f = rnd();
      if (f < 0.05) send(msg(++t, 'WeightPullFailed', { ...p, reason: 'checksum-mismatch' }));
      else if (f < 0.1) send(msg(++t, 'WeightPullFailed', { ...p, reason: 'connection reset' }));
      else send(msg(++t, 'WeightPullCompleted', { ...p, bytes: 100, durationMs: 1 }));
    }
  }
  // The trainer publishes once more, then faults stop: everything in flight completes, and every living rollout ends whole on the newest version.
  publish();
  for (let guard = 0; Object.keys(state.pulls).length > 0 && guard < 10_000; guard++) {
    const p = pick(Object.values(state.pulls).sort((a, b) => a.pullId.localeCompare(b.pullId)));
    send(msg(++t, 'WeightPullCompleted', { ...p, bytes: 100, durationMs: 1 }));
  }
  // (Seeds 1, 2 and 7 include trainer faults; every seed retires versions and replaces rollouts.)
  return { state, assignments, violations, target: targetVersion(state)!, trainerFaults };
}

describe('pull scheduler: seeded randomized runs keep the invariants (paper §5.2.1, §5.2.2)', () => {
  it.each([
    [1, 1, 1],
    [2, 1, 1],
    [3, 2, 1],
    [42, 1, 1],
    [7, 3, 1],
    [5, 1, 2],
    [6, 2, 3],
  ])('seed %i, window %i, %i shard(s): no source serves one bucket to two pullers at once; all end whole; relays carry load', (seed, window, shards) => {
    const { state, assignments, violations, target } = simulate(seed, window, shards);
    expect(violations).toEqual([]);
    for (const r of liveRollouts(state)) {
      expect(holdsWhole(state, r, target)).toBe(true);
      expect(state.relays[`${r}@${target}`]).toBeDefined();
    }
    const viaRelay = assignments.filter((d) => d.type === 'WeightPullAssigned' && d.data.sourceId.startsWith('r-'));
    expect(viaRelay.length).toBeGreaterThan(0);
    // Retention: at most K=2 live versions once nothing is in flight.
    expect(Object.values(state.versions).filter((v) => v.status === 'live').length).toBeLessThanOrEqual(2);
  });
});
