import { InProcessBus } from '@robustrl/bus';
import { createMessage, Draft, MessageOf, Topics } from '@robustrl/contracts';
import { Decider, JobCommand } from '@robustrl/domain-kit';
import { EventStore } from '@robustrl/store';
import { eventually } from '@robustrl/testing/eventually';
import { DecidingConsumer, idleJobRetentionFromEnv } from './deciding-consumer';

type Step = MessageOf<'TrainingStepCompleted'>;
/** Counts a job's completed steps: enough state to see whether it survived eviction. */
const counter: Decider<{ steps: number }, JobCommand<Step>, Step, Draft> = {
  initialState: () => ({ steps: 0 }),
  evolve: (s) => ({ steps: s.steps + 1 }),
  decide: () => [],
};

describe('DecidingConsumer: bounded state', () => {
  let bus: InProcessBus;
  let store: EventStore;
  let now: number;
  let consumer: DecidingConsumer<{ steps: number }, Step>;
  /** The counter behind a deciding consumer with a 60 s retention, on virtual time. */
  const counterConsumer = () =>
    new DecidingConsumer(bus, store, {
      consumer: 'counter',
      topics: [Topics.training],
      inputTypes: ['TrainingStepCompleted'],
      decider: counter,
      tickIntervalMs: null,
      clock: () => now,
      idleJobRetentionMs: 60_000,
    });
  const step = (jobId: string, n: number) =>
    createMessage('TrainingStepCompleted', { step: n, batchId: `b${n}`, durationMs: 1 }, { jobId, source: 'spec', occurredAt: new Date(now).toISOString() });

  beforeEach(async () => {
    now = Date.parse('2026-11-23T00:00:00Z');
    bus = new InProcessBus();
    store = await EventStore.open({ kind: 'pglite' });
    consumer = counterConsumer();
    await consumer.start();
  });
  afterEach(async () => {
    await consumer.stop();
    await bus.close();
    await store.close();
  });

  it('evicts a job silent past the retention, keeps a live one, and restores the evicted one from the inbox when it speaks again', async () => {
    await bus.publish([step('done', 1), step('done', 2), step('live', 1)]);
    await eventually('three steps applied', () => (consumer.stateOf('done')?.steps === 2 && consumer.stateOf('live')?.steps === 1 ? true : undefined));

    now += 45_000;
    await bus.publish(step('live', 2));
    await eventually('the live job applied its step', () => (consumer.stateOf('live')?.steps === 2 ? true : undefined));
    now += 30_000; // 'done' silent 75 s, 'live' 30 s
    expect(await consumer.evictIdleJobs()).toEqual(['done']);
    expect(consumer.jobs()).toEqual(['live']);
    expect(consumer.stateOf('done')).toBeUndefined();

    await bus.publish(step('done', 3));
    // Not 1 (a fresh state): the two steps before the eviction came back from the inbox.
    await eventually('the evicted job restored and advanced', () => (consumer.stateOf('done')?.steps === 3 ? true : undefined));
  });

  it('on a restart, a job whose newest message is older than the retention stays out of memory; a recent one is folded in', async () => {
    await bus.publish([step('old', 1), step('old', 2)]);
    await eventually('the old job applied', () => (consumer.stateOf('old')?.steps === 2 ? true : undefined));
    now += 50_000;
    await bus.publish(step('recent', 1));
    await eventually('the recent job applied', () => (consumer.stateOf('recent')?.steps === 1 ? true : undefined));
    await consumer.stop();

    now += 20_000; // 'old' last spoke 70 s ago, 'recent' 20 s ago; the retention is 60 s
    consumer = counterConsumer();
    await consumer.start();
    expect(consumer.jobs()).toEqual(['recent']);
    await bus.publish(step('old', 3));
    await eventually('the old job restored when it speaks', () => (consumer.stateOf('old')?.steps === 3 ? true : undefined));
  });

  it('reads its retention from ROBUSTRL_JOB_STATE_RETENTION_SECONDS, `off` for never, and refuses a bad value', () => {
    expect(idleJobRetentionFromEnv({})).toBe(3_600_000);
    expect(idleJobRetentionFromEnv({ ROBUSTRL_JOB_STATE_RETENTION_SECONDS: '90' })).toBe(90_000);
    expect(idleJobRetentionFromEnv({ ROBUSTRL_JOB_STATE_RETENTION_SECONDS: 'off' })).toBeNull();
    expect(() => idleJobRetentionFromEnv({ ROBUSTRL_JOB_STATE_RETENTION_SECONDS: '-1' })).toThrow(/ROBUSTRL_JOB_STATE_RETENTION_SECONDS/);
  });
});

type Sample = MessageOf<'GpuActivitySampled'>;
type Tally = { samples: number; facts: number; newestSampleAt: number | null };
/**
 * Counts samples and facts of a job, evolving in place (as the detector does): a restart that lost or
 * refolded anything shows in the counts.
 */
const tally: Decider<Tally, JobCommand<Step | Sample>, Step | Sample, Draft> = {
  evolution: 'in-place',
  initialState: () => ({ samples: 0, facts: 0, newestSampleAt: null }),
  evolve: (s, e) => {
    if (e.type === 'GpuActivitySampled') {
      s.samples += 1;
      s.newestSampleAt = Math.max(s.newestSampleAt ?? -Infinity, Date.parse(e.occurredAt));
    } else s.facts += 1;
    return s;
  },
  decide: () => [],
};

describe('DecidingConsumer: snapshots and restart (docs/contributors/snapshots.md)', () => {
  let bus: InProcessBus;
  let store: EventStore;
  let consumer: DecidingConsumer<Tally, Step | Sample>;
  let now: number;
  const JOB = 'job-snap';
  const tallyConsumer = () =>
    new DecidingConsumer(bus, store, {
      consumer: 'tally',
      topics: [Topics.training, Topics.telemetry],
      inputTypes: ['TrainingStepCompleted', 'GpuActivitySampled'],
      decider: tally,
      tickIntervalMs: null,
      clock: () => now,
      idleJobRetentionMs: null,
      // The test takes snapshots itself.
      snapshotIntervalMs: 3_600_000,
    });
  const meta = () => ({ jobId: JOB, source: 'spec', occurredAt: new Date(now).toISOString() });
  const fact = (n: number) => createMessage('TrainingStepCompleted', { step: n, batchId: `b${n}`, durationMs: 1 }, meta());
  const sample = () =>
    createMessage(
      'GpuActivitySampled',
      { machineId: 'trainer-0', sampledAt: new Date(now).toISOString(), intervalSeconds: 1, tensorActive: 0.5, source: 'emulated' },
      meta(),
    );
  const publishSamples = async (n: number) => {
    for (let i = 0; i < n; i += 500) {
      now += 1_000;
      await bus.publish(Array.from({ length: Math.min(500, n - i) }, sample));
    }
  };
  const counted = (samples: number, facts: number) => () => {
    const s = consumer.stateOf(JOB);
    return s?.samples === samples && s.facts === facts ? s : undefined;
  };

  beforeEach(async () => {
    now = Date.parse('2026-11-23T00:00:00Z');
    bus = new InProcessBus({ partitions: 2 });
    store = await EventStore.open({ kind: 'pglite' });
    consumer = tallyConsumer();
    await consumer.start();
  });
  afterEach(async () => {
    await consumer.stop();
    await bus.close();
    await store.close();
  });

  /** Samples and facts, a snapshot, more of both, a crash; the restart's rows read and the counts after it. */
  async function crashAfter(samplesBefore: number) {
    await bus.publish([fact(1), fact(2)]);
    await publishSamples(samplesBefore);
    await eventually('all applied', counted(samplesBefore, 2));
    await consumer.snapshot();
    await bus.publish(fact(3));
    await publishSamples(700);
    await eventually('all applied after the snapshot', counted(samplesBefore + 700, 3));
    const newest = consumer.stateOf(JOB)!.newestSampleAt;
    await consumer.abandon();
    consumer = tallyConsumer();
    await consumer.start();
    const rows = consumer.loadedRows();
    // Everything after the snapshot comes back exactly: the fact from the inbox, the samples from the bus.
    await eventually('caught up after the crash', counted(samplesBefore + 700, 3));
    expect(consumer.stateOf(JOB)!.newestSampleAt).toBe(newest);
    return rows;
  }

  it('keeps no sample in the store: the inbox and the event log hold the facts only', async () => {
    await bus.publish([fact(1)]);
    await publishSamples(1_000);
    await eventually('applied', counted(1_000, 1));
    expect((await store.readJob(JOB)).map((l) => l.message.type)).toEqual(['TrainingStepCompleted']);
    expect(await store.inbox.read(store.dataSource.manager, 'tally')).toHaveLength(1);
  });

  it('restarts from its snapshot: one snapshot row and the inbox rows after it, samples read again from the bus, however many there were', async () => {
    const few = await crashAfter(1_000);
    expect(few).toEqual({ snapshotRows: 1, inboxRows: 1 });
    await consumer.stop();
    await bus.close();
    await store.close();
    bus = new InProcessBus({ partitions: 2 });
    store = await EventStore.open({ kind: 'pglite' });
    consumer = tallyConsumer();
    await consumer.start();
    // Twenty times the samples: the restart reads the same rows.
    expect(await crashAfter(20_000)).toEqual(few);
  });

  it('after a graceful stop replays nothing: the final snapshot covers everything', async () => {
    await bus.publish([fact(1)]);
    await publishSamples(600);
    await eventually('applied', counted(600, 1));
    await consumer.stop();
    consumer = tallyConsumer();
    await consumer.start();
    expect(consumer.loadedRows()).toEqual({ snapshotRows: 1, inboxRows: 0 });
    expect(consumer.stateOf(JOB)).toEqual(expect.objectContaining({ samples: 600, facts: 1 }));
    await bus.publish(fact(2));
    await eventually('the next fact on top of it', counted(600, 2));
  });

  it('a write that fails reloads from the last snapshot and starts over from there: nothing lost, nothing counted twice', async () => {
    await bus.publish([fact(1)]);
    await publishSamples(500);
    await eventually('applied', counted(500, 1));
    await consumer.snapshot();
    const transaction = jest.spyOn(store.dataSource.manager, 'query').mockRejectedValueOnce(new Error('connect ECONNREFUSED 127.0.0.1:5432'));
    await bus.publish(fact(2));
    await publishSamples(500);
    await eventually('everything once after the reload', counted(1_000, 2));
    expect(transaction).toHaveBeenCalled();
    transaction.mockRestore();
    expect(consumer.loadedRows()).toEqual({ snapshotRows: 1, inboxRows: 0 });
  });
});
