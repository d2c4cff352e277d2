import { DeciderRun, DeciderSpecification } from '@robustrl/domain-kit';
import { DataOf, Draft, draft, publicationDigest } from '@robustrl/contracts';
import { timeline } from '@robustrl/testing/job-timeline';
import { createWeightRegistryDecider, WeightRegistryDecider } from './weight-registry.decider';
import { trainerReleased, WeightRegistryEvent, WeightRegistryInput, WeightRegistryState } from './weight-registry.state';

const msg = timeline('job-weights');
const D = WeightRegistryDecider;
const spec = DeciderSpecification.for(D);
const eq = (actual: Draft[], expected: readonly Draft[]) => expect(actual).toEqual(expected);
const observe = (message: WeightRegistryInput) => ({ kind: 'observe' as const, message, now: Date.parse(message.occurredAt) });

const register = (machineId: string, s = 0, role: 'rollout' | 'trainer' = 'rollout') =>
  msg(s, 'MachineRegistered', {
    machineId,
    role,
    zone: 'az-1',
    hardwareClass: 'h100x8',
    gpus: 8,
    agentAddress: `http://${machineId}:8090`,
    dpRank: 0,
    weightsAddress: `${machineId}:9000`,
  });
const publish = (s: number, version: number, opts: { sources?: string[]; buckets?: number; salt?: string } = {}) => {
  const n = opts.buckets ?? 3;
  return msg(s, 'WeightVersionPublished', {
    version,
    step: version,
    buckets: Array.from({ length: n }, (_, index) => ({ index, sizeBytes: 1_000, checksum: `v${version}-b${index}${opts.salt ?? ''}` })),
    totalBytes: n * 1_000,
    sources: (opts.sources ?? ['trainer-0']).map((instanceId) => ({ instanceId, address: `${instanceId}:7000` })),
  });
};
const rolloutFault = (s: number, machineId: string) =>
  msg(s, 'FaultConfirmed', {
    verdictId: `${machineId}/v${s}`,
    machineId,
    role: 'rollout',
    rule: 'rollout-silent',
    handledAs: 'rollout',
    machineFaulty: true,
    detectionLatencyMs: 70_000,
    evidence: {},
  });
const trainerFault = (s: number, machineId = 'trainer-0') =>
  msg(s, 'FaultConfirmed', {
    verdictId: `${machineId}/v${s}`,
    machineId,
    role: 'trainer',
    rule: 'trainer-idle',
    handledAs: 'trainer',
    machineFaulty: false,
    detectionLatencyMs: 300_000,
    evidence: {},
  });
/** The digest of what publish(…, version, opts) publishes: every assignment of it names this one. */
const digestOf = (version: number, opts: { buckets?: number; salt?: string } = {}) =>
  publicationDigest({ version, buckets: (publish(0, version, opts).data as DataOf<'WeightVersionPublished'>).buckets });
const assigned = (version: number, bucketIndex: number, pullerId: string, sourceId: string, attempt = 1, content: { buckets?: number; salt?: string } = {}) =>
  draft('WeightPullAssigned', {
    pullId: `w${version}/b${bucketIndex}/${pullerId}#${attempt}`,
    version,
    bucketIndex,
    pullerId,
    sourceId,
    // Trainer ranks serve from the manifest's address, rollouts from their registered weight server.
    sourceAddress: sourceId.startsWith('trainer') ? `${sourceId}:7000` : `${sourceId}:9000`,
    publication: digestOf(version, content),
  });

/** Drives the decider as the shell does: decide, then fold the input and the drafts; checks redelivery. */
class Run {
  private readonly run: DeciderRun<WeightRegistryState, WeightRegistryInput, WeightRegistryEvent, Draft>;
  t = 100;
  readonly log: Draft[] = [];
  constructor(
    readonly decider = D,
    given: WeightRegistryInput[] = [],
  ) {
    this.run = DeciderRun.for(decider, (d: Draft) => msg(this.t, d.type, d.data as never) as WeightRegistryEvent).given();
    for (const m of given) this.send(m);
  }
  get state(): WeightRegistryState {
    return this.run.state;
  }
  send(message: WeightRegistryInput): Draft[] {
    const before = this.run.emitted.length;
    const out = this.run.send(observe(message));
    const published = this.run.emitted.slice(before).map((e) => e.event);
    // Redelivery of the input, and the registry reading its own outputs back, decide nothing.
    for (const again of [message, ...published]) expect(this.decider.decide(observe(again as WeightRegistryInput), this.state)).toEqual([]);
    this.log.push(...out);
    return out;
  }
  pull(pullerId: string) {
    const p = Object.values(this.state.pulls).filter((x) => x.pullerId === pullerId);
    if (p.length !== 1) throw new Error(`${pullerId} has ${p.length} pulls in flight`);
    return p[0];
  }
  complete(pullerId: string): Draft[] {
    const p = this.pull(pullerId);
    return this.send(msg(++this.t, 'WeightPullCompleted', { ...p, bytes: 1_000, durationMs: 5 }));
  }
  fail(pullerId: string, reason: string): Draft[] {
    const p = this.pull(pullerId);
    return this.send(msg(++this.t, 'WeightPullFailed', { ...p, reason }));
  }
  /** Completes pulls, oldest first, until nothing is in flight. */
  drain(): void {
    for (let guard = 0; Object.keys(this.state.pulls).length > 0; guard++) {
      if (guard > 10_000) throw new Error('did not drain');
      const p = Object.values(this.state.pulls).sort((a, b) => a.pullId.localeCompare(b.pullId))[0];
      this.send(msg(++this.t, 'WeightPullCompleted', { ...p, bytes: 1_000, durationMs: 5 }));
    }
  }
}

const fourRollouts = () => [register('trainer-0', 0, 'trainer'), register('r-0'), register('r-1'), register('r-2'), register('r-3')];

describe('weight registry: one version to four rollouts from one trainer source (paper §5.2.1)', () => {
  it('first pulls come only from the trainer, one puller per bucket at a time', () => {
    spec
      .given(fourRollouts())
      .when(observe(publish(1, 1)))
      .then([assigned(1, 0, 'r-0', 'trainer-0')], eq);
  });

  it('pipelines: a rollout holding bucket 0 serves bucket 0 while it still pulls bucket 1', () => {
    const run = new Run(D, [...fourRollouts(), publish(1, 1)]);
    expect(run.complete('r-0')).toEqual([
      assigned(1, 1, 'r-0', 'trainer-0'),
      assigned(1, 0, 'r-1', 'r-0'),
      // The trainer is busy with bucket 1, but not with bucket 0: it serves bucket 0 to the next puller.
      assigned(1, 0, 'r-2', 'trainer-0'),
      // r-3 waits: both holders of bucket 0 serve it already.
    ]);
  });

  it('every rollout ends whole and relays; some buckets travel via relays; nothing is fetched twice', () => {
    const run = new Run(D, [...fourRollouts(), publish(1, 1, { buckets: 4 })]);
    run.drain();
    const joined = run.log.filter((d) => d.type === 'RelayJoined').map((d) => (d.data as { instanceId: string }).instanceId);
    expect(joined.sort()).toEqual(['r-0', 'r-1', 'r-2', 'r-3']);
    const pulls = run.log.filter((d) => d.type === 'WeightPullAssigned').map((d) => d.data as { pullerId: string; bucketIndex: number; sourceId: string });
    expect(pulls).toHaveLength(16);
    expect(new Set(pulls.map((p) => `${p.pullerId}/${p.bucketIndex}`)).size).toBe(16);
    expect(pulls.filter((p) => p.sourceId.startsWith('r-')).length).toBeGreaterThan(0);
    // Sync mode: once every rollout holds it whole, the update stage is over and the trainer is released.
    expect(trainerReleased(run.state, 1)).toBe(true);
  });
});

describe('weight registry without relays (the baseline bench:weights compares against)', () => {
  it('every bucket comes from the trainer, still one puller per bucket at a time', () => {
    const run = new Run(createWeightRegistryDecider({ relays: false }), [...fourRollouts(), publish(1, 1, { buckets: 4 })]);
    run.drain();
    const pulls = run.log.filter((d) => d.type === 'WeightPullAssigned').map((d) => d.data.sourceId);
    expect(pulls).toHaveLength(16);
    expect(new Set(pulls)).toEqual(new Set(['trainer-0']));
    expect(run.log.filter((d) => d.type === 'RelayJoined')).toHaveLength(4);
  });
});

describe('weight registry: failures while pulling (paper §5.2.2)', () => {
  /** r-0 is whole and relays; r-1 has buckets 0 and 1 and pulls bucket 2 from r-0. */
  const midPullFromRelay = () => {
    const run = new Run(D, [register('trainer-0', 0, 'trainer'), register('r-0'), register('r-1'), publish(1, 1)]);
    run.complete('r-0'); // r-0: b1 from the trainer; r-1: b0 from r-0
    run.complete('r-1'); // r-1 waits for b1: its only holder, the trainer, serves it to r-0
    run.complete('r-0'); // r-0: b2 from the trainer; r-1: b1 from r-0
    run.complete('r-1'); // r-1 waits for b2 (the trainer serves it to r-0)
    run.complete('r-0'); // r-0 whole → RelayJoined; r-1: b2 from r-0 (rollouts before the trainer on a tie)
    expect(run.pull('r-1')).toMatchObject({ bucketIndex: 2, sourceId: 'r-0' });
    return run;
  };

  it('a relay dying mid-pull: it leaves the relay set, its puller continues the remaining bucket elsewhere', () => {
    const run = midPullFromRelay();
    expect(run.send(rolloutFault(200, 'r-0'))).toEqual([
      draft('RelayLeft', { instanceId: 'r-0', version: 1, reason: 'confirmed faulty (rollout-silent)' }),
      draft('WeightPullFailed', { pullId: 'w1/b2/r-1#1', version: 1, bucketIndex: 2, pullerId: 'r-1', sourceId: 'r-0', reason: 'source-lost' }),
      assigned(1, 2, 'r-1', 'trainer-0', 2),
    ]);
    run.drain();
    const r1 = run.log
      .filter((d) => d.type === 'WeightPullAssigned' && (d.data as { pullerId: string }).pullerId === 'r-1')
      .map((d) => (d.data as { bucketIndex: number }).bucketIndex);
    expect(r1).toEqual([0, 1, 2, 2]); // completed buckets 0 and 1 were never fetched again
  });

  it('a pull failure blaming the source makes the puller go elsewhere for that version', () => {
    const run = midPullFromRelay();
    expect(run.fail('r-1', 'connection reset by peer')).toEqual([assigned(1, 2, 'r-1', 'trainer-0', 2)]);
    expect(run.state.versions[1].unreachable).toEqual(['r-0']);
  });

  it('a corrupted bucket is pulled again (from the same source: corruption does not blame it)', () => {
    const run = new Run(D, [register('trainer-0', 0, 'trainer'), register('r-0'), publish(1, 1)]);
    expect(run.fail('r-0', 'checksum-mismatch')).toEqual([assigned(1, 0, 'r-0', 'trainer-0', 2)]);
  });

  it('a checksum failure found after completion drops that copy: the relay leaves, re-pulls the bucket, rejoins', () => {
    const run = new Run(D, [register('trainer-0', 0, 'trainer'), register('r-0'), register('r-1'), publish(1, 1)]);
    run.drain();
    const r0b1 = run.log.find((d) => d.type === 'WeightPullAssigned' && d.data.pullerId === 'r-0' && d.data.bucketIndex === 1)!.data as {
      pullId: string;
      sourceId: string;
    };
    const late = msg(300, 'WeightPullFailed', {
      pullId: r0b1.pullId,
      version: 1,
      bucketIndex: 1,
      pullerId: 'r-0',
      sourceId: r0b1.sourceId,
      reason: 'checksum-mismatch after whole-version verification',
    });
    expect(run.send(late)).toEqual([
      draft('RelayLeft', { instanceId: 'r-0', version: 1, reason: 'no longer holds version 1 whole (a bucket failed its checksum, or its agent restarted)' }),
      assigned(1, 1, 'r-0', 'r-1', 2),
    ]);
    expect(run.complete('r-0')).toEqual([draft('RelayJoined', { instanceId: 'r-0', version: 1, address: 'r-0:9000' })]);
  });

  it('the trainer dying mid-version: in-flight pulls fail, the version is abandoned (partials dropped), nothing is assigned until it is republished', () => {
    const run = new Run(D, [...fourRollouts(), publish(1, 1)]);
    run.complete('r-0');
    const inFlight = Object.values(run.state.pulls).sort((a, b) => a.pullId.localeCompare(b.pullId));
    expect(inFlight).toHaveLength(3);
    expect(run.send(trainerFault(200))).toEqual([
      ...inFlight.map((p) => draft('WeightPullFailed', { ...p, reason: 'source-version-abandoned' })),
      draft('WeightVersionRetired', { version: 1 }),
    ]);
    expect(run.state.holdings['r-0']?.[1]).toBeUndefined();
    expect(D.decide({ kind: 'tick', now: 0 }, run.state)).toEqual([]);
    // The recovered trainer publishes again (a new publication of the same number): pulls restart from bucket 0.
    expect(run.send(publish(400, 1, { sources: ['trainer-0/r0'] }))).toEqual([assigned(1, 0, 'r-0', 'trainer-0/r0', 2)]);
  });

  it('the trainer dying while the previous version is whole everywhere: the new one is abandoned, rollouts keep serving the old one', () => {
    const run = new Run(D, [...fourRollouts(), publish(1, 1)]);
    run.drain();
    run.send(publish(300, 2));
    const out = run.send(trainerFault(310));
    expect(out.at(-1)).toEqual(draft('WeightVersionRetired', { version: 2 }));
    expect(out.filter((d) => d.type === 'WeightPullAssigned')).toEqual([]);
    expect(Object.keys(run.state.relays).sort()).toEqual(['r-0@1', 'r-1@1', 'r-2@1', 'r-3@1']);
  });

  it('the trainer dying once a relay holds the version whole: the version survives, its pullers continue from relays', () => {
    const run = new Run(D, [register('trainer-0', 0, 'trainer'), register('r-0'), register('r-1'), register('r-2'), publish(1, 1, { buckets: 2 })]);
    run.complete('r-0');
    run.complete('r-0'); // r-0 whole
    expect(run.state.relays['r-0@1']).toBeDefined();
    const out = run.send(trainerFault(200));
    expect(out.filter((d) => d.type === 'WeightVersionRetired')).toEqual([]);
    expect(out.filter((d) => d.type === 'WeightPullFailed').map((d) => d.data.reason)).toEqual(expect.arrayContaining(['source-lost']));
    run.drain();
    expect(Object.keys(run.state.relays).sort()).toEqual(['r-0@1', 'r-1@1', 'r-2@1']);
  });

  it('a rollout registering outside an update pulls the latest version from a relay', () => {
    const run = new Run(D, [...fourRollouts(), publish(1, 1)]);
    run.drain();
    expect(run.send(register('r-9', 500))).toEqual([assigned(1, 0, 'r-9', 'r-0')]);
  });

  it('a rollout lent to the trainer leaves the relay set', () => {
    const run = new Run(D, [...fourRollouts(), publish(1, 1)]);
    run.drain();
    const lend = msg(600, 'MachineRoleChanged', { machineId: 'r-2', from: 'rollout', to: 'trainer', reason: 'warm standby' });
    expect(run.send(lend)).toEqual([draft('RelayLeft', { instanceId: 'r-2', version: 1, reason: 'became trainer: warm standby' })]);
  });
});

describe('weight registry: async mode releases the trainer after the first whole relay (paper §5.2.1)', () => {
  it('trainerReleased turns true with the first RelayJoined; new pulls then avoid the trainer', () => {
    const jobStarted = msg(0, 'JobStarted', { mode: 'async', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 3 });
    const run = new Run(D, [jobStarted, register('trainer-0', 0, 'trainer'), register('r-0'), register('r-1'), register('r-2'), publish(1, 1, { buckets: 2 })]);
    run.complete('r-0'); // r-0: b1 from trainer; r-1: b0 from r-0; r-2: b0 from trainer
    expect(trainerReleased(run.state, 1)).toBe(false);
    const out = run.complete('r-0');
    expect(out.slice(0, 2)).toEqual([
      draft('RelayJoined', { instanceId: 'r-0', version: 1, address: 'r-0:9000' }),
      draft('TrainerReleased', { version: 1, step: 1, reason: 'first-relay' }),
    ]);
    expect(trainerReleased(run.state, 1)).toBe(true);
    // From here on every new pull is served by a rollout.
    const before = run.log.length;
    run.drain();
    const later = run.log
      .slice(before)
      .filter((d) => d.type === 'WeightPullAssigned')
      .map((d) => d.data.sourceId);
    expect(later.length).toBeGreaterThan(0);
    expect(later.every((s) => s.startsWith('r-'))).toBe(true);
  });

  it('a released trainer serves a bucket whose every living holder was reported unreachable', () => {
    const jobStarted = msg(0, 'JobStarted', { mode: 'async', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 2 });
    const run = new Run(D, [jobStarted, register('trainer-0', 0, 'trainer'), register('r-0'), publish(1, 1, { buckets: 1 })]);
    run.complete('r-0');
    expect(trainerReleased(run.state, 1)).toBe(true);
    run.send(register('r-1', 2));
    expect(run.pull('r-1').sourceId).toBe('r-0');
    // r-1 cannot reach r-0 (a cut link, a stale address): the registry does not give it r-0 again and again.
    const retry = run.fail('r-1', 'connection refused').filter((d) => d.type === 'WeightPullAssigned');
    expect(retry).toEqual([{ ...assigned(1, 0, 'r-1', 'trainer-0', 2, { buckets: 1 }) }]);
    // r-0 stays last for this version until a pull from it completes.
    expect(run.state.versions[1].unreachable).toEqual(['r-0']);
  });

  it('in sync mode the first relay does not release the trainer', () => {
    const run = new Run(D, [register('trainer-0', 0, 'trainer'), register('r-0'), register('r-1'), publish(1, 1, { buckets: 1 })]);
    run.complete('r-0');
    expect(run.state.relays['r-0@1']).toBeDefined();
    expect(trainerReleased(run.state, 1)).toBe(false);
    expect(run.log.some((d) => d.type === 'TrainerReleased')).toBe(false);
    // The last rollout to hold it whole releases the trainer, announced once.
    expect(run.complete('r-1')).toEqual([
      draft('RelayJoined', { instanceId: 'r-1', version: 1, address: 'r-1:9000' }),
      draft('TrainerReleased', { version: 1, step: 1, reason: 'all-rollouts-hold' }),
    ]);
    run.send(register('r-2'));
    run.drain();
    expect(run.log.filter((d) => d.type === 'TrainerReleased')).toHaveLength(1);
  });

  it('a rollout registered without a weight server neither pulls nor holds back the release', () => {
    const noUcx = msg(0, 'MachineRegistered', {
      machineId: 'r-9',
      role: 'rollout',
      zone: 'az-1',
      hardwareClass: 'h100x8',
      gpus: 8,
      agentAddress: 'http://r-9:8090',
      dpRank: 0,
    });
    const run = new Run(D, [register('trainer-0', 0, 'trainer'), register('r-0'), noUcx, publish(1, 1, { buckets: 1 })]);
    expect(run.log.filter((d) => d.type === 'WeightPullAssigned').map((d) => d.data.pullerId)).toEqual(['r-0']);
    expect(run.complete('r-0').map((d) => d.type)).toEqual(['RelayJoined', 'TrainerReleased']);
  });
});

describe('weight registry: a machine registering again', () => {
  const withIncarnation = (machineId: string, s: number, incarnation: string, weightsAddress = `${machineId}:9000`) =>
    msg(s, 'MachineRegistered', { ...(register(machineId, s).data as DataOf<'MachineRegistered'>), incarnation, weightsAddress });

  it('from the same agent process (its engine restarted in place) keeps what it holds', () => {
    const run = new Run(D, [register('trainer-0', 0, 'trainer'), withIncarnation('r-0', 0, 'a'), publish(1, 1, { buckets: 1 })]);
    run.complete('r-0');
    expect(run.send(withIncarnation('r-0', 5, 'a'))).toEqual([]);
    expect(run.state.relays['r-0@1']).toBeDefined();
  });

  it('from a new agent process, before any verdict saw the old one go, holds nothing and is reached at its new address', () => {
    const run = new Run(D, [
      register('trainer-0', 0, 'trainer'),
      withIncarnation('r-0', 0, 'a'),
      withIncarnation('r-1', 0, 'a'),
      publish(1, 1, { buckets: 1 }),
    ]);
    run.drain();
    expect(run.state.relays['r-0@1']).toBeDefined();
    const out = run.send(withIncarnation('r-0', 5, 'b', 'r-0:9100'));
    expect(out).toContainEqual(
      draft('RelayLeft', { instanceId: 'r-0', version: 1, reason: 'no longer holds version 1 whole (a bucket failed its checksum, or its agent restarted)' }),
    );
    expect(run.state.machines['r-0'].weightsAddress).toBe('r-0:9100');
    expect(run.pull('r-0').sourceId).toBe('r-1');
  });

  it("a pull assigned to the old agent process fails and is assigned again: the new one never heard of it (a task restart's stall)", () => {
    const run = new Run(D, [register('trainer-0', 0, 'trainer'), withIncarnation('r-0', 0, 'a'), publish(1, 1, { buckets: 1 })]);
    expect(run.pull('r-0')).toMatchObject({ pullId: 'w1/b0/r-0#1', pullerIncarnation: 'a' });
    // The agent restarts (new process, new weight server) before it reported the pull either way.
    const out = run.send(withIncarnation('r-0', 5, 'b', 'r-0:9100'));
    expect(out).toEqual([
      draft('WeightPullFailed', { pullId: 'w1/b0/r-0#1', version: 1, bucketIndex: 0, pullerId: 'r-0', sourceId: 'trainer-0', reason: 'puller-restarted' }),
      assigned(1, 0, 'r-0', 'trainer-0', 2, { buckets: 1 }),
    ]);
    expect(run.pull('r-0')).toMatchObject({ pullId: 'w1/b0/r-0#2', pullerIncarnation: 'b' });
    run.complete('r-0');
    expect(run.state.relays['r-0@1']).toBeDefined();
  });
});

describe('weight registry: retention keeps the newest K versions', () => {
  const distribute = (run: Run, s: number, version: number) => {
    run.send(publish(s, version));
    run.drain();
  };

  it('retires a version once it is older than K and no rollout serves it', () => {
    const run = new Run(D, [register('trainer-0', 0, 'trainer'), register('r-0'), register('r-1')]);
    distribute(run, 1, 1);
    distribute(run, 10, 2);
    expect(run.log.filter((d) => d.type === 'WeightVersionRetired')).toEqual([]);
    const out = run.send(publish(20, 3));
    expect(out).toContainEqual(draft('WeightVersionRetired', { version: 1 }));
    expect(run.state.versions[2].status).toBe('live');
  });

  it('never retires a version a live rollout still serves; retires it when that rollout goes', () => {
    const run = new Run(createWeightRegistryDecider({ retainVersions: 2 }), [register('trainer-0', 0, 'trainer'), register('r-0'), register('r-1')]);
    distribute(run, 1, 1);
    // r-0 moves on to version 2; r-1's pull of it fails its checksum and is pulled again: r-1 still serves version 1.
    run.send(publish(10, 2, { buckets: 1 }));
    run.complete('r-0');
    expect(run.state.relays['r-0@2']).toBeDefined();
    const r1 = run.pull('r-1');
    run.send(msg(30, 'WeightPullFailed', { ...r1, reason: 'checksum-mismatch' }));
    // Version 3 is published: version 1 is older than K=2, but r-1 serves it and still pulls version 2.
    const out = run.send(publish(40, 3, { buckets: 1 }));
    expect(out.filter((d) => d.type === 'WeightVersionRetired')).toEqual([]);
    expect(run.state.versions[1].status).toBe('live');
    const gone = run.send(rolloutFault(50, 'r-1'));
    expect(gone).toContainEqual(draft('RelayLeft', { instanceId: 'r-1', version: 1, reason: 'confirmed faulty (rollout-silent)' }));
    expect(gone).toContainEqual(draft('WeightVersionRetired', { version: 1 }));
  });
});

describe('weight registry: redelivery', () => {
  it('a redelivered completion decides nothing twice', () => {
    const run = new Run(D, [...fourRollouts(), publish(1, 1)]);
    const p = run.pull('r-0');
    const done = msg(150, 'WeightPullCompleted', { ...p, bytes: 1, durationMs: 1 });
    expect(run.send(done).length).toBeGreaterThan(0);
    expect(D.decide(observe(done), run.state)).toEqual([]);
  });

  it("a redelivered trainer fault older than the recovered trainer's publication changes nothing", () => {
    const run = new Run(D, [...fourRollouts(), publish(1, 1)]);
    const fault = trainerFault(200);
    run.send(fault);
    run.send(publish(400, 1));
    const state = [fault as WeightRegistryEvent].reduce(D.evolve, run.state);
    expect(state).toEqual(run.state);
  });
});
