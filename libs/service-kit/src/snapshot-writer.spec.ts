import { Logger } from '@nestjs/common';
import { InProcessBus, PartitionPosition } from '@robustrl/bus';
import { createMessage, Draft, MessageOf, Topics } from '@robustrl/contracts';
import { Decider, JobCommand } from '@robustrl/domain-kit';
import { EventStore } from '@robustrl/store';
import { eventually } from '@robustrl/testing/eventually';
import { ReloadingError } from './deciding-types';
import { DecisionWriter } from './decision-writer';
import { JobStates } from './job-states';
import { DEFAULT_SNAPSHOT_INTERVAL_MS, snapshotIntervalFromEnv, SnapshotWriter } from './snapshot-writer';

type Step = MessageOf<'TrainingStepCompleted'>;
const counter: Decider<{ steps: number }, JobCommand<Step>, Step, Draft> = {
  initialState: () => ({ steps: 0 }),
  evolve: (s) => ({ steps: s.steps + 1 }),
  decide: () => [],
};
const NOW = Date.parse('2026-11-23T12:00:00Z');
const logger = Object.assign(new Logger('snapshot-writer.spec'), { log: jest.fn(), warn: jest.fn(), error: jest.fn() });

describe('SnapshotWriter: the changed states with the positions they cover', () => {
  let store: EventStore;
  let bus: InProcessBus;
  let n = 0;
  const name = () => `snapshots-${n}`;
  const step = (jobId: string) =>
    createMessage('TrainingStepCompleted', { step: 1, batchId: 'b', durationMs: 1 }, { jobId, source: 'spec', occurredAt: new Date(NOW).toISOString() });

  /** A writer over fresh states holding jobs `a` (changed) and `b` (unchanged since its snapshot). */
  function setUp() {
    n += 1;
    const reloads = { stale: false, begin: jest.fn(), committed: jest.fn() };
    const states = new JobStates(counter, null, () => NOW, logger);
    const writer = new DecisionWriter(bus, store, name(), reloads, {}, logger);
    const acknowledged: PartitionPosition[][] = [];
    const snapshots = new SnapshotWriter(
      {
        store,
        name: name(),
        states,
        writer,
        reloads,
        input: { newestInputAt: NOW - 5_000 },
        acknowledge: async (positions) => void acknowledged.push(positions),
        clock: () => NOW,
        logger,
      },
      50,
    );
    states.fold(step('a'));
    states.fold(step('a'));
    states.fold(step('b'));
    states.lastActive.set('a', NOW - 1_000);
    states.dirty.add('a');
    states.applied.set(`${Topics.training}/1`, 12n);
    states.applied.set(`${Topics.telemetry}/0`, 3n);
    return { reloads, states, writer, snapshots, acknowledged };
  }

  beforeAll(async () => {
    store = await EventStore.open({ kind: 'pglite' });
    bus = new InProcessBus();
  });
  afterAll(async () => {
    await bus.close();
    await store.close();
  });

  it('writes the changed jobs, after the writes before it, with the positions and the newest input; then acknowledges the positions', async () => {
    const { states, writer, snapshots, acknowledged } = setUp();
    await writer.commit({ applied: [step('a')], outbox: [], emitted: new Map(), inputs: [] });
    await snapshots.snapshotNow();

    const manager = store.dataSource.manager;
    const [{ seq }] = await manager.query(`SELECT max(seq)::text AS seq FROM robustrl_inbox WHERE consumer = $1`, [name()]);
    expect(await store.snapshots.cover(manager, name())).toEqual({
      inboxSeq: seq,
      positions: { [`${Topics.training}/1`]: '12', [`${Topics.telemetry}/0`]: '3' },
      newestInputAt: NOW - 5_000,
    });
    const a = await store.snapshots.job(manager, name(), 'a');
    expect(a).toEqual(expect.objectContaining({ jobId: 'a', inboxSeq: seq, lastActiveAt: NOW - 1_000 }));
    expect(states.codec.decode(JSON.parse(a!.state))).toEqual({ steps: 2 });
    expect(await store.snapshots.job(manager, name(), 'b')).toBeNull();
    expect(states.dirty.size).toBe(0);
    expect(acknowledged).toEqual([
      [
        { topic: Topics.training, partition: 1, nextOffset: '12' },
        { topic: Topics.telemetry, partition: 0, nextOffset: '3' },
      ],
    ]);
  });

  it('writes nothing when no job changed and the positions are those covered, by the last snapshot or by the load', async () => {
    const { states, snapshots, acknowledged } = setUp();
    await snapshots.snapshotNow();
    await snapshots.snapshotNow();
    expect(acknowledged).toHaveLength(1);
    states.applied.set(`${Topics.training}/1`, 13n);
    await snapshots.snapshotNow();
    expect(acknowledged).toHaveLength(2);

    const loaded = setUp();
    loaded.states.dirty.clear();
    loaded.snapshots.covered({ [`${Topics.training}/1`]: '12', [`${Topics.telemetry}/0`]: '3' });
    await loaded.snapshots.snapshotNow();
    expect(loaded.acknowledged).toEqual([]);
    expect(await store.snapshots.cover(store.dataSource.manager, name())).toBeNull();
  });

  it('a snapshot that fails keeps its jobs to be written and starts a reload; while the state reloads none is taken', async () => {
    const { reloads, states, snapshots, acknowledged } = setUp();
    const refused = jest.spyOn(store, 'transaction').mockRejectedValueOnce(new Error('connect ECONNREFUSED'));
    await expect(snapshots.snapshotNow()).rejects.toThrow('connect ECONNREFUSED');
    refused.mockRestore();
    expect([...states.dirty]).toEqual(['a']);
    expect(reloads.begin).toHaveBeenCalledTimes(1);

    reloads.stale = true;
    await snapshots.snapshotNow();
    expect(acknowledged).toEqual([]);
    expect(await store.snapshots.cover(store.dataSource.manager, name())).toBeNull();
    // A reload begun while it waited on the writes before it: refused, the jobs kept, no second reload.
    const chained = setUp();
    chained.reloads.stale = false;
    const blocked = chained.writer.chain(async () => void (chained.reloads.stale = true));
    await expect(chained.snapshots.snapshotNow()).rejects.toThrow(ReloadingError);
    await blocked;
    expect([...chained.states.dirty]).toEqual(['a']);
    expect(chained.reloads.begin).not.toHaveBeenCalled();
  });

  it('takes one every interval until stopped, and reads the interval from ROBUSTRL_SNAPSHOT_INTERVAL_SECONDS', async () => {
    const { snapshots } = setUp();
    const snapshot = jest.fn(async () => undefined);
    snapshots.startTimer(snapshot);
    await eventually('two snapshots on the timer', () => (snapshot.mock.calls.length >= 2 ? true : undefined));
    snapshots.stopTimer();
    const taken = snapshot.mock.calls.length;
    await new Promise((r) => setTimeout(r, 150));
    expect(snapshot).toHaveBeenCalledTimes(taken);

    expect(snapshotIntervalFromEnv({})).toBe(DEFAULT_SNAPSHOT_INTERVAL_MS);
    expect(snapshotIntervalFromEnv({ ROBUSTRL_SNAPSHOT_INTERVAL_SECONDS: '2.5' })).toBe(2_500);
    expect(() => snapshotIntervalFromEnv({ ROBUSTRL_SNAPSHOT_INTERVAL_SECONDS: 'off' })).toThrow(
      /ROBUSTRL_SNAPSHOT_INTERVAL_SECONDS must be a positive number of seconds, got 'off'/,
    );
  });
});
