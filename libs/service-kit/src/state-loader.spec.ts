import { Logger } from '@nestjs/common';
import { createMessage, Draft, MessageOf, Topics } from '@robustrl/contracts';
import { Decider, JobCommand } from '@robustrl/domain-kit';
import { EventStore, writeDecision } from '@robustrl/store';
import { eventually } from '@robustrl/testing/eventually';
import { InputWatermark } from './deciding-types';
import { JobStates } from './job-states';
import { UNSHARDED } from './shard';
import { checkShardLayout, Reloader, ReloadSteps, StateLoader } from './state-loader';

type Step = MessageOf<'TrainingStepCompleted'>;
type Paused = MessageOf<'DetectionPaused'>;
type Counted = { steps: number; paused: number };
/** Counts steps (an input) and pauses (not one): what the inbox folded back is in the counts. */
const counter: Decider<Counted, JobCommand<Step>, Step | Paused, Draft> = {
  initialState: () => ({ steps: 0, paused: 0 }),
  evolve: (s, e) => (e.type === 'TrainingStepCompleted' ? { ...s, steps: s.steps + 1 } : { ...s, paused: s.paused + 1 }),
  decide: () => [],
};
const HOUR = 3_600_000;
const logger = Object.assign(new Logger('state-loader.spec'), { log: jest.fn(), warn: jest.fn() });

describe('StateLoader: the states from the latest snapshot and the inbox after it', () => {
  let store: EventStore;
  let now: number;
  let states: JobStates<Counted, Step | Paused>;
  let input: InputWatermark & { noted: string[] };
  let loader: StateLoader<Counted, Step | Paused>;
  const at = (ms: number) => new Date(ms).toISOString();
  const step = (jobId: string, n: number, when = now) =>
    createMessage('TrainingStepCompleted', { step: n, batchId: `b${n}`, durationMs: 1 }, { jobId, source: 'spec', occurredAt: at(when) });
  const paused = (jobId: string) =>
    createMessage(
      'DetectionPaused',
      { reason: 'consumer-lag', blindSince: at(now), detail: 'spec' },
      { jobId, source: 'counter', occurredAt: at(now + 60_000) },
    );
  const inbox = (...applied: Array<Step | Paused>) => writeDecision(store.dataSource.manager, { consumer: 'counter', applied, outbox: [] });
  /** A snapshot of these jobs' states, covering the inbox as it is now. */
  const snapshot = async (jobs: Array<{ jobId: string; state: Counted; lastActiveAt: number }>, positions: Record<string, string>, newestInputAt: number) => {
    const [{ seq }] = await store.dataSource.manager.query(`SELECT coalesce(max(seq), 0)::text AS seq FROM robustrl_inbox WHERE consumer = 'counter'`);
    const rows = jobs.map((j) => ({ ...j, state: JSON.stringify(states.codec.encode(j.state)), inboxSeq: seq as string }));
    await store.snapshots.save(store.dataSource.manager, 'counter', rows, { inboxSeq: seq, positions, newestInputAt });
  };

  beforeAll(async () => {
    store = await EventStore.open({ kind: 'pglite' });
  });
  afterAll(() => store.close());
  beforeEach(async () => {
    await store.dataSource.manager.query(`DELETE FROM robustrl_inbox WHERE consumer = 'counter'`);
    await store.dataSource.manager.query(`DELETE FROM robustrl_job_snapshots WHERE consumer = 'counter'`);
    await store.dataSource.manager.query(`DELETE FROM robustrl_consumer_snapshots WHERE consumer = 'counter'`);
    await store.dataSource.manager.query(`DELETE FROM robustrl_consumer_checkpoints WHERE consumer = 'counter'`);
    now = Date.parse('2026-11-23T12:00:00Z');
    states = new JobStates(counter, HOUR, () => now, logger);
    const noted: string[] = [];
    input = {
      newestInputAt: null,
      noted,
      noteInput(message) {
        noted.push(message.eventId);
        const t = Date.parse(message.occurredAt);
        if (this.newestInputAt === null || t > this.newestInputAt) this.newestInputAt = t;
      },
    };
    loader = new StateLoader({ store, name: 'counter', states, inputTypes: ['TrainingStepCompleted'], input, clock: () => now, logger });
  });

  it('from an empty store loads nothing and covers no position', async () => {
    expect(await loader.load()).toEqual({});
    expect(loader.loadedRows()).toEqual({ snapshotRows: 0, inboxRows: 0 });
    expect(states.readableJobs()).toEqual([]);
  });

  it('with no snapshot folds the whole inbox; only inputs move the newest input; the checkpoints tell what was decided before', async () => {
    const [a1, a2, b1] = [step('a', 1, now - 3_000), step('a', 2, now - 2_000), step('b', 1, now - 1_000)];
    await writeDecision(store.dataSource.manager, {
      consumer: 'counter',
      checkpoint: { stream: `${Topics.training}/0`, position: '41' },
      applied: [a1, a2, b1],
      outbox: [],
    });
    await inbox(paused('a'));
    expect(await loader.load()).toEqual({});
    expect(loader.loadedRows()).toEqual({ snapshotRows: 0, inboxRows: 4 });
    expect(states.readableState('a')).toEqual({ steps: 2, paused: 1 });
    expect(states.readableState('b')).toEqual({ steps: 1, paused: 0 });
    expect(input.noted).toEqual([a1.eventId, a2.eventId, b1.eventId]);
    expect(loader.decidedBefore.get(`${Topics.training}/0`)).toBe(41n);
    // Last active when its newest message happened, never later than now (the pause is stamped a minute ahead).
    expect(states.lastActive.get('a')).toBe(now);
    expect(states.lastActive.get('b')).toBe(now - 1_000);
  });

  it('starts from the latest snapshot and the rows after it; a job silent past the retention stays out until it speaks', async () => {
    await inbox(step('a', 1), step('a', 2), step('old', 1));
    await snapshot(
      [
        { jobId: 'a', state: { steps: 2, paused: 0 }, lastActiveAt: now },
        { jobId: 'old', state: { steps: 1, paused: 0 }, lastActiveAt: now - 2 * HOUR },
      ],
      { [`${Topics.training}/0`]: '3' },
      now - 500,
    );
    await inbox(step('a', 3));
    now += 1_000;

    expect(await loader.load()).toEqual({ [`${Topics.training}/0`]: '3' });
    expect(loader.loadedRows()).toEqual({ snapshotRows: 1, inboxRows: 1 });
    expect(states.readableJobs()).toEqual(['a']);
    expect(states.get('a')).toEqual({ steps: 3, paused: 0 });
    expect(states.applied.get(`${Topics.training}/0`)).toBe(3n);
    expect(input.newestInputAt).toBe(now - 1_000); // the row after the snapshot is newer than what the snapshot saw

    await loader.ensureLoaded('old');
    expect(states.get('old')).toEqual({ steps: 1, paused: 0 });
    await loader.ensureLoaded('never-seen');
    expect(states.has('never-seen')).toBe(false);
  });

  it('a job left out at start that has rows after the snapshot comes back from its own snapshot, not from scratch', async () => {
    await inbox(step('old', 1), step('old', 2));
    await snapshot([{ jobId: 'old', state: { steps: 2, paused: 0 }, lastActiveAt: now - 2 * HOUR }], {}, now - 2 * HOUR);
    await inbox(step('old', 3));
    await loader.load();
    expect(states.readableState('old')).toEqual({ steps: 3, paused: 0 });
    expect(loader.loadedRows()).toEqual({ snapshotRows: 0, inboxRows: 1 });
  });

  it('skips the inbox rows a job snapshot already holds, even past the rows the snapshot cover holds', async () => {
    await snapshot([], {}, now);
    await inbox(step('a', 1), step('a', 2));
    const [{ seq }] = await store.dataSource.manager.query(`SELECT max(seq)::text AS seq FROM robustrl_inbox WHERE consumer = 'counter'`);
    const cover = (await store.snapshots.cover(store.dataSource.manager, 'counter'))!;
    const state = JSON.stringify(states.codec.encode({ steps: 2, paused: 0 }));
    await store.snapshots.save(store.dataSource.manager, 'counter', [{ jobId: 'a', state, lastActiveAt: now, inboxSeq: seq }], {
      inboxSeq: cover.inboxSeq,
      positions: {},
      newestInputAt: now,
    });
    await inbox(step('a', 3));
    await loader.load();
    expect(states.readableState('a')).toEqual({ steps: 3, paused: 0 });
    expect(loader.loadedRows()).toEqual({ snapshotRows: 1, inboxRows: 3 });
  });

  it('refuses to start on another shard layout\u2019s state unless told to replay it', async () => {
    await writeDecision(store.dataSource.manager, {
      consumer: 'counter.shard-0-of-2',
      checkpoint: { stream: `${Topics.training}/0`, position: '1' },
      applied: [],
      outbox: [],
    });
    await expect(checkShardLayout(store, 'counter', UNSHARDED, undefined, logger)).rejects.toThrow(
      /another layout \(counter.shard-0-of-2\).*ROBUSTRL_SHARD_LAYOUT_CHANGE=replay/,
    );
    await expect(checkShardLayout(store, 'counter', UNSHARDED, 'replay', logger)).resolves.toBeUndefined();
    await expect(checkShardLayout(store, 'counter', { index: 1, count: 2 }, undefined, logger)).resolves.toBeUndefined();
    await store.dataSource.manager.query(`DELETE FROM robustrl_consumer_checkpoints WHERE consumer = 'counter.shard-0-of-2'`);
  });
});

describe('Reloader: start over from the store after a write did not commit', () => {
  function reloaderWith(steps: Partial<ReloadSteps> = {}) {
    const calls: string[] = [];
    let stopped = false;
    const reloader = new Reloader(
      {
        stopConsuming: async () => void calls.push('stop consuming'),
        load: async () => void calls.push('load'),
        consume: async () => void calls.push('consume'),
        ...steps,
      },
      () => stopped,
      () => ({ snapshotRows: 1, inboxRows: 2 }),
      logger,
    );
    return { reloader, calls, stop: () => (stopped = true) };
  }

  it('stops consuming, loads, and consumes again; stale until the states are loaded; a second failure meanwhile joins the reload under way', async () => {
    const { reloader, calls } = reloaderWith();
    expect(reloader.stale).toBe(false);
    reloader.begin(new Error('write failed'));
    reloader.begin(new Error('the next write failed too'));
    expect(reloader.stale).toBe(true);
    await reloader.settled();
    expect(reloader.stale).toBe(false);
    expect(calls).toEqual(['stop consuming', 'load', 'consume']);
  });

  it('retries a load that fails, staying stale; a stopped consumer does not reload', async () => {
    let failures = 1;
    const { reloader, calls, stop } = reloaderWith({
      load: async () => {
        calls.push('load');
        if (failures-- > 0) throw new Error('connect ECONNREFUSED');
      },
    });
    reloader.begin(new Error('write failed'));
    await eventually('loaded on the second attempt', () => (calls.filter((c) => c === 'load').length === 2 ? true : undefined));
    await reloader.settled();
    expect(reloader.stale).toBe(false);
    expect(calls).toEqual(['stop consuming', 'load', 'stop consuming', 'load', 'consume']);

    stop();
    reloader.committed();
    reloader.begin(new Error('after stop'));
    expect(reloader.stale).toBe(false);
    await reloader.settled();
    expect(calls).toHaveLength(5);
  });
});
