import { EventStore } from '@robustrl/store';
import { RecordingBus, trajectory, turn } from '@robustrl/testing/trajectory-fixtures';
import { TRAJECTORY_STORE_MIGRATIONS, TrajectoryStore } from '@robustrl/trajectory-store';
import { StoreTrajectoryRecorder } from './store-trajectory-recorder';
import { RecordRefusedError, TurnConflictError } from './trajectory-recorder';

/** The router's recorder on the trajectory store itself (PGlite here; the same SQL runs on PostgreSQL in the integration tests). */
describe('StoreTrajectoryRecorder', () => {
  let store: EventStore;
  let trajectories: TrajectoryStore;
  let bus: RecordingBus;
  let recorder: StoreTrajectoryRecorder;

  beforeAll(async () => {
    store = await EventStore.open({ kind: 'pglite' }, { migrations: TRAJECTORY_STORE_MIGRATIONS });
    bus = new RecordingBus();
    // As the router opens it (recording-store.ts).
    trajectories = new TrajectoryStore(store, bus, { publishInBackground: true, notify: 'ownership' });
    recorder = new StoreTrajectoryRecorder(trajectories);
  });
  afterAll(async () => {
    await recorder.close();
    await store.close();
  });

  it('reads, starts and appends as the HTTP API did: prefix with attempt, idempotent writes, continuation decided by the store', async () => {
    expect(await recorder.prefix('s-unknown')).toEqual({ attempt: 0, turns: [] });
    await recorder.start(trajectory('s1', { promptId: 'p-s1' }));
    await recorder.start(trajectory('s1', { promptId: 'p-s1' }));
    await recorder.appendTurns([
      turn('s1', 0, { weightVersion: 4, kind: 'tool-call', attempt: 0 }),
      turn('s1', 1, { weightVersion: 5, kind: 'tool-result', attempt: 0 }),
    ]);
    await recorder.appendTurns([turn('s1', 1, { weightVersion: 5, kind: 'tool-result', attempt: 0 })]);
    expect(await recorder.prefix('s1')).toMatchObject({
      attempt: 0,
      turns: [
        { turnIndex: 0, weightVersion: 4, kind: 'tool-call' },
        { turnIndex: 1, weightVersion: 5, kind: 'tool-result' },
      ],
    });
    expect(await recorder.continueWith('s1', { rolloutId: 'rollout-2', continuation: { weightVersion: 5, policy: 'keep', maxStaleness: 1 } })).toEqual({
      action: 'continue',
      reason: 'policy-keep',
    });
    expect(await recorder.continueWith('s1', { rolloutId: 'rollout-3', continuation: { weightVersion: 6, policy: 'keep', maxStaleness: 1 } })).toEqual({
      action: 'restart-from-prompt',
      reason: 'prefix-beyond-bound',
    });
    expect(await recorder.prefix('s1')).toEqual({ attempt: 1, turns: [] });
    await expect(recorder.continueWith('s-unknown', { rolloutId: 'r', continuation: { weightVersion: 6, policy: 'keep' } })).rejects.toThrow(/not stored/);
  });

  it('refuses what contradicts the store: another turn at a stored index, a turn of a dropped attempt, another id in the same slot', async () => {
    await recorder.start(trajectory('s2', { promptId: 'p-s2' }));
    await recorder.appendTurns([turn('s2', 0, { attempt: 0 })]);
    await expect(recorder.appendTurns([turn('s2', 0, { turnId: 's2/other', attempt: 0 })])).rejects.toThrow(TurnConflictError);
    await expect(recorder.appendTurns([turn('s2', 1, { attempt: 3 })])).rejects.toThrow(TurnConflictError);
    await expect(recorder.start(trajectory('s2-twin', { promptId: 'p-s2' }))).rejects.toThrow(TurnConflictError);
  });

  it("a turn of a trajectory the store does not hold is an error to ask again for; a turn the store's contract refuses is the caller's", async () => {
    const unknown = recorder.appendTurns([turn('s-none', 0)]);
    await expect(unknown).rejects.toThrow(/does not hold/);
    await expect(unknown).rejects.not.toThrow(TurnConflictError);
    await expect(recorder.appendTurns([turn('s2', 1, { tokens: -1 })])).rejects.toThrow(RecordRefusedError);
  });

  it('requests in flight share statements: 60 recordings at once take a handful of writes, each one stored once', async () => {
    const before = trajectories.appendStatements;
    await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const id = `g${i}`;
        await recorder.prefix(id);
        await recorder.start(trajectory(id, { promptId: `p-${id}` }));
        await recorder.appendTurns([turn(id, 0, { attempt: 0 })]);
      }),
    );
    expect(trajectories.appendStatements - before).toBeLessThanOrEqual(6);
    const stored = await trajectories.prefixes(Array.from({ length: 60 }, (_, i) => `g${i}`));
    expect([...stored.values()].map((p) => p.turns.length)).toEqual(Array(60).fill(1));
  });

  it('opens in one call: a new trajectory is started with no turns, a stored one comes with its turns, another id in its slot is a conflict', async () => {
    expect(await recorder.open(trajectory('o1', { promptId: 'p-o1' }))).toEqual({ attempt: 0, turns: [] });
    await recorder.appendTurns([turn('o1', 0, { attempt: 0, weightVersion: 2 })]);
    expect(await recorder.open(trajectory('o1', { promptId: 'p-o1' }))).toMatchObject({ attempt: 0, turns: [{ turnIndex: 0, weightVersion: 2 }] });
    await expect(recorder.open(trajectory('o1-twin', { promptId: 'p-o1' }))).rejects.toThrow(TurnConflictError);
    await expect(recorder.open(trajectory('o1', { promptId: 'p-other' }))).rejects.toThrow(TurnConflictError);
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => recorder.open(trajectory(`o-many-${i}`, { promptId: `p-o-many-${i}` }))));
    expect(many.every((p) => p.turns.length === 0)).toBe(true);
    expect((await trajectories.prefixes(['o-many-0', 'o-many-19'])).size).toBe(2);
  });

  it('announces ownership only, behind the writes: the first generated turn, and a turn from another rollout', async () => {
    await recorder.open(trajectory('s3', { promptId: 'p-s3' }));
    await recorder.appendTurns([turn('s3', 0, { attempt: 0, kind: 'tool-call', rolloutId: 'e0' })]);
    await recorder.appendTurns([turn('s3', 1, { attempt: 0, kind: 'tool-result', rolloutId: null })]);
    await recorder.appendTurns([turn('s3', 2, { attempt: 0, kind: 'tool-call', rolloutId: 'e0' })]);
    await recorder.appendTurns([turn('s3', 3, { attempt: 0, kind: 'tool-result', rolloutId: null })]);
    await recorder.appendTurns([turn('s3', 4, { attempt: 0, kind: 'model-output', rolloutId: 'e1' })]);
    await trajectories.drainPublishes();
    // Many per record: TrajectoryTurnsAppended, nothing per turn or per start.
    expect(bus.published.filter((m) => m.type === 'TrajectoryTurnAppended' || m.type === 'TrajectoryStatusChanged')).toEqual([]);
    const mine = bus.published.flatMap((m) => (m.type === 'TrajectoryTurnsAppended' ? m.data.turns : [])).filter((t) => t.trajectoryId === 's3');
    expect(mine.map((t) => [t.turnIndex, t.rolloutId])).toEqual([
      [0, 'e0'],
      [4, 'e1'],
    ]);
  });
});
