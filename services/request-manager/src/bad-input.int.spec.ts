import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { EventStore } from '@robustrl/store';
import { freshPostgresStore } from '@robustrl/testing/databases';
import { RecordingBus, trajectory, turn } from '@robustrl/testing/trajectory-fixtures';
import { TRAJECTORY_STORE_MIGRATIONS, TrajectoryStore, TurnWriter } from '@robustrl/trajectory-store';
import { TrajectoriesController } from './trajectories.controller';

/**
 * A caller's bad input is that caller's problem only: on the real PostgreSQL, a value its column cannot
 * hold (an integer past INTEGER, a NUL in a TEXT id) is refused with a 400 naming the field before it is
 * batched, so the turns flushed in the same statement are stored.
 */
describe('bad input on the trajectory API (PostgreSQL)', () => {
  let db: { store: EventStore; drop(): Promise<void> };
  let app: INestApplication;
  let writer: TurnWriter;
  let base: string;

  beforeAll(async () => {
    db = await freshPostgresStore({ migrations: TRAJECTORY_STORE_MIGRATIONS });
    const trajectories = new TrajectoryStore(db.store, new RecordingBus());
    // One flush takes every append of the burst: a bad row in it would fail all of them.
    writer = new TurnWriter(trajectories, { flushIntervalMs: 20, maxBatch: 500 });
    const moduleRef = await Test.createTestingModule({
      controllers: [TrajectoriesController],
      providers: [
        { provide: TrajectoryStore, useValue: trajectories },
        { provide: TurnWriter, useValue: writer },
      ],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    base = `${await app.getUrl()}/v1`;
  });
  afterAll(async () => {
    await app?.close();
    await writer?.close();
    await db?.drop();
  });

  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as any };
  };

  it.each([
    ['an integer past its INTEGER column', { turnIndex: 2 ** 40 }, 'turnIndex'],
    ['a NUL in a TEXT id', { turnId: 'bad\u0000turn' }, 'turnId'],
    ['a weight version past its column', { weightVersion: 2 ** 31 }, 'weightVersion'],
    [
      'a NUL in a span engine id',
      { spans: [{ rolloutId: 'e\u0000', weightVersion: 0, tokenIds: [1], logprobs: [null], sampled: 1, context: 'prompt' }] },
      'spans.0.rolloutId',
    ],
  ])('one turn with %s among 100 concurrent appends gets a 400 naming it; the other 99 are stored', async (_what, bad, field) => {
    const batch = `b-${field.replace(/\W/g, '')}`;
    const ids = Array.from({ length: 100 }, (_, i) => `${batch}-${i}`);
    expect((await post('/trajectories', { trajectories: ids.map((id, i) => trajectory(id, { batchId: batch, sampleIndex: i })) })).status).toBe(200);
    const answers = await Promise.all(
      ids.map((id, i) => {
        const { trajectoryId: _t, ...t } = turn(id, 0);
        return post(`/trajectories/${encodeURIComponent(id)}/turns`, i === 37 ? { ...t, ...bad } : t);
      }),
    );
    expect(answers[37].status).toBe(400);
    expect(answers[37].body.issues.map((i: { path: string }) => i.path)).toContain(field);
    const others = answers.filter((_, i) => i !== 37);
    expect(others.map((a) => a.status)).toEqual(others.map(() => 200));
    expect(others.every((a) => a.body.results[0].outcome === 'new')).toBe(true);
    const [{ n }] = await db.store.dataSource.query(`SELECT count(*)::int AS n FROM robustrl_trajectory_turns WHERE trajectory_id LIKE $1`, [`${batch}-%`]);
    expect(n).toBe(99);
  });

  it('refuses a trajectory whose step or ids its columns cannot hold, naming the field, and starts none of the call', async () => {
    const res = await post('/trajectories', {
      trajectories: [trajectory('start-ok'), trajectory('start-bad', { step: 2 ** 33 }), trajectory('start-nul', { promptId: 'p\u0000' })],
    });
    expect(res.status).toBe(400);
    expect(res.body.issues.map((i: { path: string }) => i.path)).toEqual(['trajectories.1.step', 'trajectories.2.promptId']);
    expect((await fetch(`${base}/trajectories/start-ok`)).status).toBe(404);
  });
});
