import { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  AppendResponse,
  BatchProgressResponse,
  CompletedBatchResponse,
  StartResponse,
  StatusResult,
  TrajectoryPrefix,
  TrajectoryWithTurns,
} from '@robustrl/contracts';
import { EventStore } from '@robustrl/store';
import { TRAJECTORY_STORE_MIGRATIONS, TrajectoryStore, TurnWriter } from '@robustrl/trajectory-store';
import { TrajectoriesController } from './trajectories.controller';
import { RecordingBus, trajectory, turn } from '@robustrl/testing/trajectory-fixtures';
// The router's side of this API (rollout manager): its recorder must read and drive what this controller serves.
import { HttpTrajectoryRecorder } from '../../rollout-manager/src/router/http-trajectory-recorder';

describe('trajectories HTTP API', () => {
  let store: EventStore;
  let app: INestApplication;
  let base: string;

  beforeAll(async () => {
    store = await EventStore.open({ kind: 'pglite' }, { migrations: TRAJECTORY_STORE_MIGRATIONS });
    const trajectories = new TrajectoryStore(store, new RecordingBus());
    const moduleRef = await Test.createTestingModule({
      controllers: [TrajectoriesController],
      providers: [
        { provide: TrajectoryStore, useValue: trajectories },
        { provide: TurnWriter, useValue: new TurnWriter(trajectories, { flushIntervalMs: 2 }) },
      ],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    base = `${await app.getUrl()}/v1`;
  });
  afterAll(async () => {
    await app.close();
    await store.close();
  });

  const call = async (method: 'GET' | 'POST', path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  it('stores a trajectory turn by turn and serves it, its batch progress and the completed batch', async () => {
    expect((await call('POST', '/trajectories', { trajectories: [trajectory('h1'), trajectory('h2', { sampleIndex: 1 })] })).status).toBe(200);
    const { trajectoryId: _ignored, ...one } = turn('h1', 0, { weightVersion: 3, kind: 'model-output' });
    expect(await call('POST', '/trajectories/h1/turns', one)).toEqual({ status: 200, body: { results: [{ turnId: 'h1/0', outcome: 'new' }] } });
    const many = [turn('h1', 0), turn('h1', 1, { weightVersion: 3 })].map(({ trajectoryId: _t, ...t }) => t);
    expect((await call('POST', '/trajectories/h1/turns', { turns: many })).body.results.map((r: any) => r.outcome)).toEqual(['duplicate', 'new']);
    expect((await call('POST', '/trajectories/h1/status', { status: 'completed' })).body).toMatchObject({ changed: true, previous: 'in-flight' });

    const got = await call('GET', '/trajectories/h1');
    expect(got.body.turns.map((t: any) => t.turnId)).toEqual(['h1/0', 'h1/1']);
    expect((await call('GET', '/jobs/job-1/batches/batch-0')).body).toMatchObject({ completed: 1, 'in-flight': 1, total: 2 });
    const completed = await call('GET', '/jobs/job-1/batches/batch-0/completed?currentWeightVersion=4&maxStaleness=1');
    expect(completed.body.trajectories.map((t: any) => t.trajectoryId)).toEqual(['h1']);
    expect((await call('GET', '/jobs/job-1/batches/batch-0/completed?currentWeightVersion=5&maxStaleness=1')).body).toMatchObject({
      trajectories: [],
      stale: [{ trajectoryId: 'h1', staleness: 2 }],
    });
  });

  it('answers 400 naming each problem, 404 for an unknown trajectory, 409 for a refused transition or turn', async () => {
    const bad = await call('POST', '/trajectories/h2/turns', { turnId: '', turnIndex: -1, kind: 'essay', rolloutId: null, weightVersion: 0, tokens: 1 });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toMatch(/turnId/);
    expect((await call('GET', '/jobs/job-1/batches/batch-0/completed?currentWeightVersion=x')).body.issues.map((i: any) => i.path)).toEqual([
      'currentWeightVersion',
      'maxStaleness',
    ]);
    expect((await call('GET', '/trajectories/nope')).status).toBe(404);
    const { trajectoryId: _t, ...t } = turn('nope', 0);
    expect((await call('POST', '/trajectories/nope/turns', t)).status).toBe(404);
    expect((await call('POST', '/trajectories/nope/status', { status: 'aborted' })).status).toBe(404);
    expect((await call('POST', '/trajectories/h1/status', { status: 'in-flight' })).status).toBe(409);
    const outcomeOnAbort = await call('POST', '/trajectories/h2/status', { status: 'aborted', outcome: { reward: 1 } });
    expect(outcomeOnAbort.status).toBe(400);
    expect(JSON.stringify(outcomeOnAbort.body)).toMatch(/outcome.*only a completed trajectory has an outcome/);
    const badReward = await call('POST', '/trajectories/h2/status', { status: 'completed', outcome: { reward: 'high', metadata: [1] } });
    expect(badReward.status).toBe(400);
    expect(badReward.body.issues.map((i: any) => i.path)).toEqual(['outcome.reward', 'outcome.metadata']);
    const { trajectoryId: _u, ...late } = turn('h1', 2);
    expect((await call('POST', '/trajectories/h1/turns', late)).body).toMatchObject({ results: [{ turnId: 'h1/2', outcome: 'closed' }] });
  });

  // The contract types the controller's answers; parsing real ones checks what types cannot (formats, bounds).
  it('answers in the shapes of the shared HTTP contract the router and trainers read', async () => {
    const body = (t: string, over = {}) => trajectory(t, { batchId: 'batch-c', ...over });
    const started = StartResponse.parse(
      (await call('POST', '/trajectories', { trajectories: [body('c1'), body('c2', { sampleIndex: 1, ownerRolloutId: null })] })).body,
    );
    expect(started.results.map((r) => r.outcome)).toEqual(['created', 'created']);
    expect(TrajectoryPrefix.parse((await call('GET', '/trajectories/c2/prefix')).body)).toMatchObject({
      turns: [],
      resumeFromTurn: 0,
      trajectory: { lastTurnIndex: -1 },
    });
    const turns = [turn('c1', 0, { weightVersion: 2 }), turn('c1', 1, { weightVersion: 2 })].map(({ trajectoryId: _t, ...t }) => t);
    expect(AppendResponse.parse((await call('POST', '/trajectories/c1/turns', { turns })).body).results).toHaveLength(2);
    expect(TrajectoryPrefix.parse((await call('GET', '/trajectories/c1/prefix')).body).resumeFromTurn).toBe(2);
    const moved = StatusResult.parse(
      (await call('POST', '/trajectories/c1/status', { status: 'reassigned', rolloutId: 'rollout-1', continuation: { weightVersion: 3, policy: 'keep' } }))
        .body,
    );
    expect(moved.continuation).toEqual({ action: 'continue', reason: 'policy-keep' });
    StatusResult.parse((await call('POST', '/trajectories/c1/status', { status: 'completed' })).body);
    expect(TrajectoryWithTurns.parse((await call('GET', '/trajectories/c1')).body).completedAt).not.toBeNull();
    expect(BatchProgressResponse.parse((await call('GET', '/jobs/job-1/batches/batch-c')).body)).toMatchObject({ completed: 1, 'in-flight': 1, total: 2 });
    const completed = CompletedBatchResponse.parse((await call('GET', '/jobs/job-1/batches/batch-c/completed?currentWeightVersion=2&maxStaleness=0')).body);
    expect(completed.trajectories.map((t) => t.turns.length)).toEqual([2]);
  });

  it("serves the router's recorder: the prefix with its attempt and versions, and a continuation the store decides", async () => {
    const router = new HttpTrajectoryRecorder(base.replace(/\/v1$/, ''));
    expect(await router.prefix('r-unknown')).toEqual({ attempt: 0, turns: [] });
    await router.start({ ...trajectory('r1', { promptId: 'p-r1' }) });
    await router.appendTurns([
      turn('r1', 0, { weightVersion: 4, kind: 'tool-call', attempt: 0 }),
      turn('r1', 1, { weightVersion: 5, kind: 'tool-result', attempt: 0 }),
    ]);
    await eventuallyStored(() => router.prefix('r1'), 2);
    expect(await router.prefix('r1')).toMatchObject({
      attempt: 0,
      turns: [
        { turnIndex: 0, weightVersion: 4 },
        { turnIndex: 1, weightVersion: 5 },
      ],
    });
    const kept = await router.continueWith('r1', { rolloutId: 'rollout-2', continuation: { weightVersion: 5, policy: 'keep', maxStaleness: 1 } });
    expect(kept).toEqual({ action: 'continue', reason: 'policy-keep' });
    const restarted = await router.continueWith('r1', { rolloutId: 'rollout-3', continuation: { weightVersion: 6, policy: 'keep', maxStaleness: 1 } });
    expect(restarted).toEqual({ action: 'restart-from-prompt', reason: 'prefix-beyond-bound' });
    expect(await router.prefix('r1')).toEqual({ attempt: 1, turns: [] });
    await expect(router.continueWith('r-unknown', { rolloutId: 'rollout-3', continuation: { weightVersion: 6, policy: 'keep' } })).rejects.toThrow(/404/);
  });
});

/** Appends go through the batched writer: wait until `n` turns are readable. */
async function eventuallyStored(read: () => Promise<{ turns: unknown[] }>, n: number): Promise<void> {
  for (let i = 0; i < 200 && (await read()).turns.length < n; i++) await new Promise((r) => setTimeout(r, 5));
}

describe('trajectories HTTP API with its store down', () => {
  let app: INestApplication;
  let base: string;
  let failure: Error;

  beforeAll(async () => {
    const down = { batchProgress: async () => Promise.reject(failure), trajectory: async () => Promise.reject(failure) };
    const moduleRef = await Test.createTestingModule({
      controllers: [TrajectoriesController],
      providers: [
        { provide: TrajectoryStore, useValue: down },
        { provide: TurnWriter, useValue: {} },
      ],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    base = `${await app.getUrl()}/v1`;
  });
  afterAll(() => app.close());

  it('answers 503 with retry-after while PostgreSQL is unreachable (callers wait and ask again), 500 for a bug', async () => {
    failure = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const unavailable = await fetch(`${base}/jobs/j/batches/b`);
    expect(unavailable.status).toBe(503);
    expect(unavailable.headers.get('retry-after')).toBe('2');
    expect(await unavailable.json()).toEqual({ error: expect.stringMatching(/trajectory store is unavailable, ask again: connect ECONNREFUSED/) });

    failure = new TypeError('cannot read properties of undefined');
    expect((await fetch(`${base}/jobs/j/batches/b`)).status).toBe(500);
    expect((await fetch(`${base}/trajectories/x`)).status).toBe(500);
  });
});
