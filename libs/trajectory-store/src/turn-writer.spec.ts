import { EventStore } from '@robustrl/store';
import { TRAJECTORY_STORE_MIGRATIONS } from './migrations';
import { RecordingBus, trajectory, turn } from '@robustrl/testing/trajectory-fixtures';
import { TrajectoryStore } from './trajectory-store';
import { TurnRejectedError, TurnWriter } from './turn-writer';

describe('TurnWriter', () => {
  let store: EventStore;
  let trajectories: TrajectoryStore;
  let bus: RecordingBus;

  beforeAll(async () => {
    store = await EventStore.open({ kind: 'pglite' }, { migrations: TRAJECTORY_STORE_MIGRATIONS });
  });
  afterAll(() => store.close());
  beforeEach(async () => {
    await store.dataSource.query('TRUNCATE robustrl_trajectories CASCADE');
    bus = new RecordingBus();
    trajectories = new TrajectoryStore(store, bus);
    await trajectories.startTrajectories(Array.from({ length: 10 }, (_, i) => trajectory(`t${i}`, { sampleIndex: i, promptId: 'p' })));
  });

  it('writes N concurrent appends in far fewer statements, each caller resolved once its turn is stored', async () => {
    const writer = new TurnWriter(trajectories, { flushIntervalMs: 5, maxBatch: 100 });
    const turns = Array.from({ length: 300 }, (_, i) => turn(`t${i % 10}`, Math.floor(i / 10)));
    const outcomes = await Promise.all(turns.map((t) => writer.append(t)));
    expect(outcomes.every((o) => o === 'new')).toBe(true);
    expect(writer.flushes).toBe(3);
    expect(trajectories.appendStatements).toBe(3);
    const [{ n }] = await store.dataSource.query(`SELECT count(*)::int AS n FROM robustrl_trajectory_turns`);
    expect(n).toBe(300);
    expect(bus.ofType('TrajectoryTurnAppended')).toHaveLength(300);
    await writer.close();
  });

  it('flushes a partial batch after the interval, and a redelivered append resolves as a duplicate', async () => {
    const writer = new TurnWriter(trajectories, { flushIntervalMs: 20, maxBatch: 500 });
    const started = Date.now();
    expect(await writer.append(turn('t0', 0))).toBe('new');
    expect(Date.now() - started).toBeGreaterThanOrEqual(15);
    expect(await Promise.all([writer.append(turn('t0', 0)), writer.append(turn('t0', 1))])).toEqual(['duplicate', 'new']);
    expect(writer.flushes).toBe(2);
    expect(bus.ofType('TrajectoryTurnAppended')).toHaveLength(2);
    await writer.close();
  });

  it('a refused turn rejects its own caller only', async () => {
    const writer = new TurnWriter(trajectories, { flushIntervalMs: 1 });
    const [ok, refused] = await Promise.allSettled([writer.append(turn('t1', 0)), writer.append(turn('ghost', 0))]);
    expect(ok).toEqual({ status: 'fulfilled', value: 'new' });
    expect(refused.status === 'rejected' && refused.reason).toBeInstanceOf(TurnRejectedError);
    expect(refused.status === 'rejected' && (refused.reason as TurnRejectedError).outcome).toBe('unknown-trajectory');
    expect(writer.flushes).toBe(1);
    await writer.close();
  });

  it('a failed flush rejects exactly the appends it carried; the next batch is written', async () => {
    const writer = new TurnWriter(trajectories, { flushIntervalMs: 1, maxBatch: 2, maxConcurrentFlushes: 1 });
    const real = trajectories.appendTurns.bind(trajectories);
    let calls = 0;
    jest.spyOn(trajectories, 'appendTurns').mockImplementation(async (turns) => {
      if (++calls === 1) throw new Error('connection reset');
      return real(turns);
    });
    const settled = await Promise.allSettled([0, 1, 2, 3].map((i) => writer.append(turn('t2', i))));
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'fulfilled', 'fulfilled']);
    expect((settled[0] as PromiseRejectedResult).reason.message).toBe('connection reset');
    // The callers retry; turn ids make that safe.
    expect(await Promise.all([writer.append(turn('t2', 0)), writer.append(turn('t2', 1))])).toEqual(['new', 'new']);
    expect((await trajectories.trajectory('t2'))!.turns).toHaveLength(4);
    await writer.close();
  });

  it('close writes what is waiting and refuses new appends', async () => {
    const writer = new TurnWriter(trajectories, { flushIntervalMs: 60_000 });
    const pending = writer.append(turn('t3', 0));
    await writer.close();
    await expect(pending).resolves.toBe('new');
    await expect(writer.append(turn('t3', 1))).rejects.toThrow('closed');
  });
});
