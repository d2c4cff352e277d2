import { codecOf, DeciderRun, DeciderSpecification } from '@robustrl/domain-kit';
import { DataOf, Draft, draft, publicationDigest } from '@robustrl/contracts';
import { timeline } from '@robustrl/testing/job-timeline';
import { WeightRegistryDecider } from './weight-registry.decider';
import { holdsBucket, holdsWhole, RegistryData, WeightRegistryEvent, WeightRegistryInput, WeightRegistryState } from './weight-registry.state';

/**
 * Named, sharded versions (DESIGN "Weights are named and sharded", docs/integrators/weights.md): each trainer
 * rank publishes its own shard, pullers pull each shard as soon as it is published, and a rollout holds
 * the version — relays it, counts for the trainer's release — only with every bucket of every shard.
 */
const msg = timeline('job-shards');
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
/** Shard `shard` of `count` of `version`, published by trainer-<shard> (one rank each) unless told otherwise. */
const publishShard = (
  s: number,
  version: number,
  shard: number,
  opts: { count?: number; source?: string; port?: number; salt?: string; buckets?: number } = {},
) => {
  const n = opts.buckets ?? 2;
  const source = opts.source ?? `trainer-${shard}`;
  return msg(s, 'WeightVersionPublished', {
    version,
    step: version,
    buckets: Array.from({ length: n }, (_, index) => ({ index, sizeBytes: 1_000, checksum: `v${version}-s${shard}-b${index}${opts.salt ?? ''}` })),
    totalBytes: n * 1_000,
    sources: [{ instanceId: source, address: `${source}:${opts.port ?? 7000}` }],
    tensors: [{ name: `layers.${shard}.weight`, dtype: 'bfloat16', shape: [500], bucket: 0, offset: 0 }],
    shard: { index: shard, count: opts.count ?? 2 },
  });
};
const trainerFault = (s: number) =>
  msg(s, 'FaultConfirmed', {
    verdictId: `trainer-0/v${s}`,
    machineId: 'trainer-0',
    role: 'trainer',
    rule: 'trainer-idle',
    handledAs: 'trainer',
    machineFaulty: false,
    detectionLatencyMs: 300_000,
    evidence: {},
  });
/** The digest of what publishShard(…, version, shard, opts) publishes: every assignment of it names this one. */
const digestOf = (version: number, shard: number, opts: { count?: number; salt?: string; buckets?: number } = {}) =>
  publicationDigest(publishShard(0, version, shard, opts).data as DataOf<'WeightVersionPublished'>);
const assigned = (
  version: number,
  shard: number,
  bucketIndex: number,
  pullerId: string,
  sourceId: string,
  attempt = 1,
  content: { count?: number; salt?: string; buckets?: number } = {},
) =>
  draft('WeightPullAssigned', {
    pullId: `w${version}/s${shard}/b${bucketIndex}/${pullerId}#${attempt}`,
    version,
    shard,
    bucketIndex,
    pullerId,
    sourceId,
    sourceAddress: sourceId.startsWith('trainer') ? `${sourceId}:7000` : `${sourceId}:9000`,
    publication: digestOf(version, shard, content),
  });

/** Drives the decider as the shell does; every input and output read back again decides nothing. */
class Run {
  private readonly run: DeciderRun<WeightRegistryState, WeightRegistryInput, WeightRegistryEvent, Draft>;
  t = 100;
  readonly log: Draft[] = [];
  constructor(given: WeightRegistryInput[] = []) {
    this.run = DeciderRun.for(D, (d: Draft) => msg(this.t, d.type, d.data as never) as WeightRegistryEvent).given();
    for (const m of given) this.send(m);
  }
  get state(): WeightRegistryState {
    return this.run.state;
  }
  send(message: WeightRegistryInput): Draft[] {
    const before = this.run.emitted.length;
    const out = this.run.send(observe(message));
    const published = this.run.emitted.slice(before).map((e) => e.event);
    for (const again of [message, ...published]) expect(D.decide(observe(again as WeightRegistryInput), this.state)).toEqual([]);
    this.log.push(...out);
    return out;
  }
  pull(pullerId: string) {
    const p = Object.values(this.state.pulls).filter((x) => x.pullerId === pullerId);
    if (p.length !== 1) throw new Error(`${pullerId} has ${p.length} pulls in flight`);
    return p[0];
  }
  complete(pullerId: string): Draft[] {
    return this.send(msg(++this.t, 'WeightPullCompleted', { ...this.pull(pullerId), bytes: 1_000, durationMs: 5 }));
  }
  drain(): void {
    for (let guard = 0; Object.keys(this.state.pulls).length > 0; guard++) {
      if (guard > 10_000) throw new Error('did not drain');
      const p = Object.values(this.state.pulls).sort((a, b) => a.pullId.localeCompare(b.pullId))[0];
      this.send(msg(++this.t, 'WeightPullCompleted', { ...p, bytes: 1_000, durationMs: 5 }));
    }
  }
  of(type: Draft['type']) {
    return this.log.filter((d) => d.type === type);
  }
}

const cluster = () => [register('trainer-0', 0, 'trainer'), register('trainer-1', 0, 'trainer'), register('r-0'), register('r-1')];

describe('weight registry: a version in shards from several publishers', () => {
  it('a shard is pulled as soon as it is published; another shard, from its own publisher, independently', () => {
    // Shard 1 is not there yet: r-1 waits for the one rank serving shard 0's bucket 0.
    spec
      .given(cluster())
      .when(observe(publishShard(1, 1, 0)))
      .then(
        [
          draft('WeightPullAssigned', {
            pullId: 'w1/b0/r-0#1',
            version: 1,
            bucketIndex: 0,
            pullerId: 'r-0',
            sourceId: 'trainer-0',
            sourceAddress: 'trainer-0:7000',
            publication: digestOf(1, 0),
          }),
        ],
        eq,
      );
    // Shard 1 arrives: r-1, still waiting on shard 0, pulls shard 1 from its publisher meanwhile.
    const run = new Run([...cluster(), publishShard(1, 1, 0)]);
    expect(run.send(publishShard(2, 1, 1))).toEqual([assigned(1, 1, 0, 'r-1', 'trainer-1')]);
  });

  it('a rollout holds the version whole — relays it, releases the trainer — only with every shard', () => {
    const run = new Run([...cluster(), publishShard(1, 1, 0)]);
    run.drain();
    for (const r of ['r-0', 'r-1']) {
      expect(holdsBucket(run.state, r, 1, 1, 0)).toBe(true);
      expect(holdsWhole(run.state, r, 1)).toBe(false);
    }
    expect(run.of('RelayJoined')).toEqual([]);
    expect(run.state.versions[1].trainerReleased).toBe(false);

    run.send(publishShard(300, 1, 1));
    run.drain();
    expect(run.of('RelayJoined').map((d) => d.data)).toEqual([
      { instanceId: expect.any(String), version: 1, address: expect.any(String) },
      { instanceId: expect.any(String), version: 1, address: expect.any(String) },
    ]);
    expect(run.of('TrainerReleased')).toEqual([draft('TrainerReleased', { version: 1, step: 1, reason: 'all-rollouts-hold' })]);
    // Every (shard, bucket) fetched once per rollout, each shard's trainer bucket only ever from that shard's rank.
    const pulls = run.of('WeightPullAssigned').map((d) => d.data as { pullerId: string; shard?: number; bucketIndex: number; sourceId: string });
    expect(pulls).toHaveLength(8);
    expect(new Set(pulls.map((p) => `${p.pullerId}/${p.shard ?? 0}/${p.bucketIndex}`)).size).toBe(8);
    for (const p of pulls) if (p.sourceId.startsWith('trainer')) expect(p.sourceId).toBe(`trainer-${p.shard ?? 0}`);
  });

  it('a relay serves the (shard, bucket) it holds, before it holds the version whole', () => {
    const run = new Run([...cluster(), register('r-2'), publishShard(1, 1, 0), publishShard(2, 1, 1)]);
    // r-0 pulls shard 0 bucket 0 from trainer-0; r-1 pulls shard 1 bucket 0 from trainer-1; r-2 waits.
    expect(Object.values(run.state.pulls).map((p) => [p.pullerId, p.shard ?? 0, p.bucketIndex, p.sourceId])).toEqual([
      ['r-0', 0, 0, 'trainer-0'],
      ['r-1', 1, 0, 'trainer-1'],
    ]);
    // r-1 completes shard 1's bucket 0: it serves it to r-2 at once, while trainer-1 serves r-1 its next bucket.
    expect(run.complete('r-1')).toEqual([assigned(1, 1, 1, 'r-1', 'trainer-1'), assigned(1, 1, 0, 'r-2', 'r-1')]);
    run.drain();
    expect(['r-0', 'r-1', 'r-2'].map((r) => holdsWhole(run.state, r, 1))).toEqual([true, true, true]);
  });

  it("a restarted rank re-publishing its shard: the same content keeps every copy; other content drops that shard's copies only", () => {
    const run = new Run([...cluster(), publishShard(1, 1, 0), publishShard(2, 1, 1, { buckets: 3 })]);
    run.complete('r-0'); // r-0: shard 0 bucket 0
    run.complete('r-1'); // r-1: shard 1 bucket 0
    const held = structuredClone(run.state.holdings);
    const inFlight = structuredClone(run.state.pulls);
    // Rank 1's agent comes back on another port with the same bytes: a new address, nothing else.
    expect(run.send(publishShard(200, 1, 1, { buckets: 3, port: 7100 }))).toEqual([]);
    expect(run.state.holdings).toEqual(held);
    expect(run.state.pulls).toEqual(inFlight);
    expect(run.state.versions[1].shards[1].sources).toEqual([{ instanceId: 'trainer-1', address: 'trainer-1:7100' }]);
    expect(run.state.versions[1].shards[0].publishedAt).toBeLessThan(run.state.versions[1].shards[1].publishedAt);

    // Rank 1 republishes other content under the same version: shard 1's copies and pulls go; shard 0's stay.
    const shard0Pulls = Object.values(run.state.pulls).filter((p) => (p.shard ?? 0) === 0);
    const out = run.send(publishShard(210, 1, 1, { buckets: 2, salt: '-retrained' }));
    expect(holdsBucket(run.state, 'r-0', 1, 0, 0)).toBe(true);
    expect(holdsBucket(run.state, 'r-1', 1, 0, 1)).toBe(false);
    for (const p of shard0Pulls) expect(run.state.pulls[p.pullId]).toEqual(p);
    expect(out.filter((d) => d.type === 'WeightPullFailed')).toEqual([]);
    run.drain();
    expect(holdsWhole(run.state, 'r-0', 1) && holdsWhole(run.state, 'r-1', 1)).toBe(true);
    // Shard 1 as it is now: two buckets of the new content, fetched again under new pull ids.
    expect(run.state.versions[1].shards[1].buckets.map((b) => b.checksum)).toEqual(['v1-s1-b0-retrained', 'v1-s1-b1-retrained']);
  });

  it('the trainer group dying before anyone holds every shard: the version is abandoned, whole shards dropped too (paper §5.2.2)', () => {
    const run = new Run([...cluster(), publishShard(1, 1, 0, { buckets: 1 }), publishShard(2, 1, 1, { buckets: 3 })]);
    run.complete('r-0'); // r-0 holds shard 0 whole, not shard 1 (it waits: trainer-1 serves shard 1's bucket 0 to r-1)
    expect(holdsBucket(run.state, 'r-0', 1, 0, 0)).toBe(true);
    const r1 = run.pull('r-1');
    const out = run.send(trainerFault(300));
    expect(out).toEqual([draft('WeightPullFailed', { ...r1, reason: 'source-version-abandoned' }), draft('WeightVersionRetired', { version: 1 })]);
    expect(run.state.holdings['r-0']?.[1]).toBeUndefined();
    // The recovered ranks publish again: pulls start over, shard by shard.
    expect(run.send(publishShard(400, 1, 1, { buckets: 3 }))).toEqual([assigned(1, 1, 0, 'r-0', 'trainer-1', 2, { buckets: 3 })]);
  });

  it('a publication with another shard count under a live version is ignored (another layout of a version that exists)', () => {
    const run = new Run([...cluster(), register('trainer-2', 0, 'trainer'), publishShard(1, 1, 0)]);
    const before = structuredClone({ ...run.state, index: undefined });
    expect(run.send(publishShard(2, 1, 2, { count: 3 }))).toEqual([]);
    expect({ ...run.state, index: undefined }).toEqual(before);
  });
});

describe('weight registry: snapshots from before shards', () => {
  it('decode as versions of one shard and decide as a registry that saw the events', () => {
    const run = new Run([register('trainer-0', 0, 'trainer'), register('r-0'), register('r-1')]);
    run.send(
      msg(1, 'WeightVersionPublished', {
        version: 1,
        step: 1,
        buckets: [0, 1].map((index) => ({ index, sizeBytes: 10, checksum: `b${index}` })),
        totalBytes: 20,
        sources: [{ instanceId: 'trainer-0', address: 'trainer-0:7000' }],
      }),
    );
    run.complete('r-0');
    const codec = codecOf(D);
    const now = JSON.parse(JSON.stringify(codec.encode(run.state))) as RegistryData;
    // The same facts as a registry before shards wrote them.
    const v = now.versions[1];
    const { shards, count: _count, ...rest } = v;
    // Nor the digest of its content (snapshots before it name none: their assignments carry none).
    const { index: _index, digest: _digest, ...shard } = shards[0];
    delete run.state.versions[1].shards[0].digest;
    const old = {
      ...now,
      versions: { 1: { ...rest, ...shard } },
      holdings: Object.fromEntries(Object.entries(now.holdings).map(([id, vs]) => [id, Object.fromEntries(Object.entries(vs).map(([k, s]) => [k, s[0]]))])),
      attempts: Object.fromEntries(Object.entries(now.attempts).map(([k, s]) => [k, s[0]])),
    };
    expect(JSON.stringify(old)).not.toContain('shards');
    const decoded = codec.decode(old);
    const plain = (x: unknown) => JSON.parse(JSON.stringify(x)) as unknown;
    expect(plain(codec.encode(decoded))).toEqual(plain(codec.encode(run.state)));
    const next = msg(50, 'WeightPullCompleted', { ...run.pull('r-0'), bytes: 10, durationMs: 1 });
    expect(D.decide(observe(next), D.evolve(decoded, next as WeightRegistryEvent))).toEqual(
      D.decide(observe(next), D.evolve(run.state, next as WeightRegistryEvent)),
    );
  });
});
