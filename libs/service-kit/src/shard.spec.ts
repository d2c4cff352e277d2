import { InProcessBus, partitionFor } from '@robustrl/bus';
import { createMessage, draft, Draft, MessageOf, RobustrlMessage, Topics } from '@robustrl/contracts';
import { Decider, JobCommand } from '@robustrl/domain-kit';
import { EventStore } from '@robustrl/store';
import { eventually } from '@robustrl/testing/eventually';
import { DecidingConsumer } from './deciding-consumer';
import { layoutOf, ownsPartition, PartitionShard, shardFromEnv, shardLayoutChangeFromEnv, shardName, UNSHARDED } from './shard';

describe('shard settings', () => {
  it('reads ROBUSTRL_SHARD as <index>/<count>, or auto from a StatefulSet hostname, and refuses anything else with the variable named', () => {
    expect(shardFromEnv({})).toEqual(UNSHARDED);
    expect(shardFromEnv({ ROBUSTRL_SHARD: '1/4' })).toEqual({ index: 1, count: 4 });
    expect(shardFromEnv({ ROBUSTRL_SHARD: 'auto', ROBUSTRL_SHARD_COUNT: '3', HOSTNAME: 'robustrl-detector-2' })).toEqual({ index: 2, count: 3 });
    expect(() => shardFromEnv({ ROBUSTRL_SHARD: '4/4' })).toThrow(/ROBUSTRL_SHARD=4\/4.*index must be from 0 to 3/);
    expect(() => shardFromEnv({ ROBUSTRL_SHARD: '0/0' })).toThrow(/count must be at least 1/);
    expect(() => shardFromEnv({ ROBUSTRL_SHARD: 'two' })).toThrow(/ROBUSTRL_SHARD must be <index>\/<count>/);
    expect(() => shardFromEnv({ ROBUSTRL_SHARD: 'auto', HOSTNAME: 'robustrl-detector-2' })).toThrow(/ROBUSTRL_SHARD_COUNT/);
    expect(() => shardFromEnv({ ROBUSTRL_SHARD: 'auto', ROBUSTRL_SHARD_COUNT: '3', HOSTNAME: 'detector' })).toThrow(/hostname ending in -<ordinal>/);
    expect(() => shardFromEnv({ ROBUSTRL_SHARD: 'auto', ROBUSTRL_SHARD_COUNT: '3', HOSTNAME: 'robustrl-detector-3' })).toThrow(/from 0 to 2/);
    expect(shardLayoutChangeFromEnv({})).toBe('refuse');
    expect(shardLayoutChangeFromEnv({ ROBUSTRL_SHARD_LAYOUT_CHANGE: 'replay' })).toBe('replay');
    expect(() => shardLayoutChangeFromEnv({ ROBUSTRL_SHARD_LAYOUT_CHANGE: 'yes' })).toThrow(/ROBUSTRL_SHARD_LAYOUT_CHANGE/);
  });

  it('names a shard after its consumer (unsharded keeps the plain name) and tells a name layout back', () => {
    expect(shardName('detector', UNSHARDED)).toBe('detector');
    expect(shardName('detector', { index: 2, count: 4 })).toBe('detector.shard-2-of-4');
    expect(layoutOf('detector', 'detector')).toBe(1);
    expect(layoutOf('detector', 'detector.shard-2-of-4')).toBe(4);
    expect(layoutOf('detector', 'detector-2')).toBeNull();
    expect(layoutOf('detector', 'controller')).toBeNull();
    const shards = [0, 1, 2].map((index) => ({ index, count: 3 }));
    for (let p = 0; p < 12; p++) expect(shards.filter((s) => ownsPartition(s, p))).toEqual([shards[p % 3]]);
  });
});

type Step = MessageOf<'TrainingStepCompleted'>;
/** Emits one output per step it decides on: each decision is visible on the bus, with the id the host derived from its cause. */
const announcer: Decider<{ steps: number }, JobCommand<Step>, Step | MessageOf<'DetectionPaused'>, Draft> = {
  initialState: () => ({ steps: 0 }),
  evolve: (s, e) => (e.type === 'TrainingStepCompleted' ? { steps: s.steps + 1 } : s),
  decide: (c) =>
    c.kind === 'observe' ? [draft('DetectionPaused', { reason: 'consumer-lag', blindSince: c.message.occurredAt, detail: `step ${c.message.data.step}` })] : [],
};

describe('DecidingConsumer in shards (docs/contributors/snapshots.md "Sharding the detector")', () => {
  const PARTITIONS = 4;
  const JOBS = Array.from({ length: 24 }, (_, i) => `job-${i}`);
  let bus: InProcessBus;
  let store: EventStore;
  const running: Array<DecidingConsumer<{ steps: number }, Step | MessageOf<'DetectionPaused'>, Step>> = [];
  const consumer = (shard: PartitionShard, shardLayoutChange?: 'replay') =>
    new DecidingConsumer(bus, store, {
      consumer: 'announcer',
      shard,
      ...(shardLayoutChange ? { shardLayoutChange } : {}),
      topics: [Topics.training],
      inputTypes: ['TrainingStepCompleted'],
      decider: announcer,
      tickIntervalMs: null,
      idleJobRetentionMs: null,
    });
  const start = async (shard: PartitionShard, shardLayoutChange?: 'replay') => {
    const c = consumer(shard, shardLayoutChange);
    await c.start();
    running.push(c);
    return c;
  };
  const step = (jobId: string, n: number) =>
    createMessage('TrainingStepCompleted', { step: n, batchId: `b${n}`, durationMs: 1 }, { jobId, source: 'spec', occurredAt: new Date().toISOString() });
  const outputs = (): RobustrlMessage[] => bus.read(Topics.verdicts).map((r) => JSON.parse(String(r.value)) as RobustrlMessage);

  beforeEach(async () => {
    bus = new InProcessBus({ partitions: PARTITIONS });
    store = await EventStore.open({ kind: 'pglite' });
  });
  afterEach(async () => {
    for (const c of running.splice(0)) await c.stop();
    await bus.close();
    await store.close();
  });

  it('each job is decided by the one shard owning its partition: every decision once, from the service, each shard under its own name', async () => {
    const shards = [0, 1].map((index) => ({ index, count: 2 }));
    const [even, odd] = await Promise.all(shards.map((s) => start(s)));
    await bus.publish(JOBS.flatMap((j) => [1, 2, 3].map((n) => step(j, n))));
    await eventually('every step decided', () => (outputs().length >= JOBS.length * 3 ? true : undefined));

    const owner = (jobId: string) => partitionFor(jobId, PARTITIONS) % 2;
    // The fixture must put jobs on both shards, else nothing is shown.
    expect(new Set(JOBS.map(owner))).toEqual(new Set([0, 1]));
    for (const [i, c] of [even, odd].entries()) {
      expect(c.jobs().sort()).toEqual(JOBS.filter((j) => owner(j) === i).sort());
      for (const j of c.jobs()) expect(c.stateOf(j)).toEqual({ steps: 3 });
    }
    const decided = outputs();
    expect(decided).toHaveLength(JOBS.length * 3);
    expect(new Set(decided.map((m) => `${m.jobId}/${(m.data as { detail: string }).detail}`)).size).toBe(JOBS.length * 3);
    expect(new Set(decided.map((m) => m.source))).toEqual(new Set(['announcer']));
    const names = await store.checkpoints.shardNames(store.dataSource.manager, 'announcer');
    expect(names).toEqual(['announcer.shard-0-of-2', 'announcer.shard-1-of-2']);
    for (const [i, name] of names.entries()) {
      const streams = [...(await store.checkpoints.readAll(store.dataSource.manager, name)).keys()];
      expect(streams.every((s) => Number(s.split('/')[1]) % 2 === i)).toBe(true);
    }
  });

  it('refuses to start another shard count over this layout, and when told to replay decides again with the same output ids', async () => {
    await Promise.all([0, 1].map((index) => start({ index, count: 2 })));
    await bus.publish(JOBS.map((j) => step(j, 1)));
    await eventually('every step decided', () => (outputs().length >= JOBS.length ? true : undefined));
    for (const c of running.splice(0)) await c.stop();
    const firstIds = new Set(outputs().map((m) => m.eventId));

    await expect(consumer(UNSHARDED).start()).rejects.toThrow(
      /announcer runs as 1 shard.*another layout \(announcer.shard-0-of-2, announcer.shard-1-of-2\).*ROBUSTRL_SHARD_LAYOUT_CHANGE=replay/,
    );
    await expect(consumer({ index: 0, count: 3 }).start()).rejects.toThrow(/another layout/);

    const replayed = await start(UNSHARDED, 'replay');
    await eventually('the replay decided every step again', () => (outputs().length >= JOBS.length * 2 ? true : undefined));
    expect(replayed.jobs()).toHaveLength(JOBS.length);
    // Decided twice, published twice — under the same ids, which downstream inboxes take once.
    expect(new Set(outputs().map((m) => m.eventId))).toEqual(firstIds);
    // The new layout has state of its own now: a restart of it starts without being told.
    await replayed.stop();
    running.splice(running.indexOf(replayed), 1);
    await (await start(UNSHARDED)).stop();
    running.pop();

    // A shard that never decided anything (its partitions quiet) starts like its siblings once its layout is established.
    await store.transaction((m) => m.query(`DELETE FROM robustrl_consumer_checkpoints WHERE consumer = 'announcer.shard-1-of-2'`));
    await start({ index: 1, count: 2 });
  });
});
