import { EventStore } from '@robustrl/store';
import { freshPostgresStore } from '@robustrl/testing/databases';
import { RecordingBus, trajectory, turn } from '@robustrl/testing/trajectory-fixtures';
import { TRAJECTORY_STORE_MIGRATIONS } from './migrations';
import { TrajectoryStore } from './trajectory-store';
import { TurnWriter } from './turn-writer';

describe('TrajectoryStore on PostgreSQL', () => {
  let db: { store: EventStore; drop(): Promise<void> };
  let url: string;

  beforeAll(async () => {
    db = await freshPostgresStore({ migrations: TRAJECTORY_STORE_MIGRATIONS });
    url = (db.store.dataSource.options as { url: string }).url;
  });
  afterAll(() => db.drop());

  it('keeps what a model sampled exactly: NUL characters (which JSONB cannot hold) and the token spans', async () => {
    const trajectories = new TrajectoryStore(db.store, new RecordingBus());
    const prompt = { messages: [{ role: 'user', content: 'echo \u0000 back' }] };
    await trajectories.startTrajectory(trajectory('nul-0', { prompt }));
    const spans = [
      { rolloutId: 'e1', weightVersion: 3, tokenIds: [5, 0, 17], logprobs: [-0.5, -2.25, null], sampled: 3, context: 'prompt' as const },
      { rolloutId: 'e2', weightVersion: 3, tokenIds: [9], logprobs: [-1], sampled: null, context: 'text' as const, prefillTokens: 40 },
    ];
    const content = { role: 'assistant', content: 'a\u0000b', $nul: ['not', 'an', 'encoding'] };
    expect(await trajectories.appendTurns([turn('nul-0', 0, { content, spans })])).toEqual([{ turnId: 'nul-0/0', outcome: 'new' }]);
    const stored = (await trajectories.trajectory('nul-0'))!;
    expect(stored.prompt).toEqual(prompt);
    expect(stored.turns[0]).toMatchObject({ content, spans });
    expect((await trajectories.prefix('nul-0')).turns[0].content).toEqual(content);
  });

  it('stores a redelivered append once and publishes it once, also when two writers race on the same turns', async () => {
    const bus = new RecordingBus();
    const trajectories = new TrajectoryStore(db.store, bus);
    const ids = Array.from({ length: 20 }, (_, i) => `race-${i}`);
    await trajectories.startTrajectories(ids.map((id, i) => trajectory(id, { batchId: 'race', sampleIndex: i, promptId: 'p' })));
    const turns = ids.flatMap((id) => [0, 1, 2, 3, 4].map((i) => turn(id, i)));

    // Two writers (say, a request and its retry on another connection) append the same 100 turns at once.
    const writers = [new TurnWriter(trajectories, { maxBatch: 30 }), new TurnWriter(trajectories, { maxBatch: 30 })];
    const outcomes = await Promise.all(writers.flatMap((w) => turns.map((t) => w.append(t))));
    expect(outcomes.filter((o) => o === 'new')).toHaveLength(100);
    expect(outcomes.filter((o) => o === 'duplicate')).toHaveLength(100);
    // And a plain redelivery afterwards.
    expect((await trajectories.appendTurns(turns.slice(0, 10))).every((r) => r.outcome === 'duplicate')).toBe(true);
    await Promise.all(writers.map((w) => w.close()));

    const [{ n }] = await db.store.dataSource.query(`SELECT count(*)::int AS n FROM robustrl_trajectory_turns WHERE trajectory_id LIKE 'race-%'`);
    expect(n).toBe(100);
    const published = bus.ofType('TrajectoryTurnAppended').map((m) => (m.data as { turnId: string }).turnId);
    expect(published).toHaveLength(100);
    expect(new Set(published).size).toBe(100);
    for (const id of ids) expect((await trajectories.trajectory(id))!.lastTurnIndex).toBe(4);
  });

  it('after a trainer restart a new store on the same database returns exactly the completed trajectories, within the staleness bound', async () => {
    const before = new TrajectoryStore(db.store, new RecordingBus());
    const n = 12;
    await before.startTrajectories(
      Array.from({ length: n }, (_, i) => trajectory(`b-${i}`, { batchId: 'batch-7', step: 7, promptId: `p${i >> 1}`, sampleIndex: i & 1 })),
    );
    for (let i = 0; i < n; i++) {
      // Sample i was generated with weights 10 - (i % 4): 0..3 versions behind version 10.
      const v = 10 - (i % 4);
      await before.appendTurns([
        turn(`b-${i}`, 0, { kind: 'model-output', weightVersion: v }),
        turn(`b-${i}`, 1, { kind: 'tool-call', weightVersion: v }),
        turn(`b-${i}`, 2, { kind: 'tool-result', weightVersion: v, content: { stdout: 'x'.repeat(2048) } }),
        turn(`b-${i}`, 3, { kind: 'model-output', weightVersion: 10 }),
      ]);
    }
    const completed = new Set<string>();
    for (let i = 0; i < n; i++) {
      if (i % 3 === 2) continue; // still in flight
      if (i === 4) {
        await before.setStatus(`b-${i}`, { status: 'aborted' });
        continue;
      }
      await before.setStatus(`b-${i}`, { status: 'completed' });
      completed.add(`b-${i}`);
    }

    // The trainer restarts: a fresh process, a fresh connection pool on the same database.
    const reopened = await EventStore.open({ kind: 'postgres', url }, { migrations: TRAJECTORY_STORE_MIGRATIONS });
    try {
      const after = new TrajectoryStore(reopened);
      const all = await after.completedOfBatch('job-1', 'batch-7', { currentWeightVersion: 10, acceptance: { maxStaleness: 3 } });
      expect(new Set(all.trajectories.map((t) => t.trajectoryId))).toEqual(completed);
      expect(all.stale).toEqual([]);
      for (const t of all.trajectories) {
        expect(t.turns.map((u) => u.turnIndex)).toEqual([0, 1, 2, 3]);
        expect(t.turns[2].content).toEqual({ stdout: 'x'.repeat(2048) });
      }

      const bounded = await after.completedOfBatch('job-1', 'batch-7', { currentWeightVersion: 10, acceptance: { maxStaleness: 1 } });
      const within = [...completed].filter((id) => Number(id.slice(2)) % 4 <= 1);
      expect(bounded.trajectories.map((t) => t.trajectoryId).sort()).toEqual(within.sort());
      expect(bounded.stale.map((s) => s.trajectoryId).sort()).toEqual([...completed].filter((id) => !within.includes(id)).sort());
      expect(bounded.stale.every((s) => s.staleness >= 2)).toBe(true);
      expect(await after.batchProgress('job-1', 'batch-7')).toEqual({ 'in-flight': 4, completed: completed.size, reassigned: 0, aborted: 1, total: n });
    } finally {
      await reopened.close();
    }
  });

  it('keeps room for heap-only summary updates and compresses large turns with LZ4 where the server has it', async () => {
    const trajectories = new TrajectoryStore(db.store);
    await trajectories.startTrajectory(trajectory('big-0', { batchId: 'big' }));
    // Spans carrying a long prompt's ids: past the 2 KB at which PostgreSQL compresses a row's values.
    const promptTokenIds = Array.from({ length: 3_000 }, (_, i) => (i * 7919) % 32_000);
    const spans = [{ rolloutId: 'e1', weightVersion: 0, tokenIds: [1, 2], logprobs: [-0.5, -1], sampled: 2, context: 'prompt' as const, promptTokenIds }];
    expect((await trajectories.appendTurns([turn('big-0', 0, { spans })]))[0].outcome).toBe('new');
    expect((await trajectories.trajectory('big-0'))!.turns[0].spans).toEqual(spans);

    const [{ options }] = await db.store.dataSource.query(`SELECT reloptions AS options FROM pg_class WHERE relname = 'robustrl_trajectories'`);
    expect(options).toContain('fillfactor=80');
    const [{ lz4 }] = await db.store.dataSource.query(`SELECT 'lz4' = ANY (enumvals) AS lz4 FROM pg_settings WHERE name = 'default_toast_compression'`);
    const [{ method }] = await db.store.dataSource.query(
      `SELECT pg_column_compression(spans) AS method FROM robustrl_trajectory_turns WHERE trajectory_id = 'big-0'`,
    );
    // Debian's PostgreSQL (deploy/local) is built with lz4; a server without it keeps its default.
    expect(method).toBe(lz4 ? 'lz4' : 'pglz');
  });
});
