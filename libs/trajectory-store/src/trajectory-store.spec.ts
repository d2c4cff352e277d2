import { EventStore } from '@robustrl/store';
import { TRAJECTORY_STORE_MIGRATIONS } from './migrations';
import { RecordingBus, trajectory, turn } from '@robustrl/testing/trajectory-fixtures';
import { TrajectoryStore } from './trajectory-store';
import { InvalidTransitionError } from './trajectory-errors';

describe('TrajectoryStore (PGlite)', () => {
  let store: EventStore;
  let bus: RecordingBus;
  let trajectories: TrajectoryStore;

  beforeAll(async () => {
    store = await EventStore.open({ kind: 'pglite' }, { migrations: TRAJECTORY_STORE_MIGRATIONS });
  });
  afterAll(() => store.close());
  beforeEach(async () => {
    await store.dataSource.query('TRUNCATE robustrl_trajectories CASCADE');
    bus = new RecordingBus();
    trajectories = new TrajectoryStore(store, bus);
  });

  it('starts trajectories idempotently and refuses a second id for the same prompt sample', async () => {
    expect(await trajectories.startTrajectories([trajectory('t1'), trajectory('t2')])).toEqual([
      { trajectoryId: 't1', outcome: 'created' },
      { trajectoryId: 't2', outcome: 'created' },
    ]);
    expect(await trajectories.startTrajectory(trajectory('t1'))).toBe('existing');
    expect(await trajectories.startTrajectory(trajectory('t3', { promptId: 'prompt-t1' }))).toBe('conflict');
    expect(bus.ofType('TrajectoryStatusChanged').map((m) => m.data)).toEqual([
      expect.objectContaining({ trajectoryId: 't1', status: 'in-flight' }),
      expect.objectContaining({ trajectoryId: 't2', status: 'in-flight' }),
    ]);
  });

  it('appends turns in one statement, once per turn id, and publishes only the new ones (metadata only)', async () => {
    await trajectories.startTrajectory(trajectory('t1'));
    const first = await trajectories.appendTurns([turn('t1', 0), turn('t1', 1), turn('t1', 2)]);
    expect(first.map((r) => r.outcome)).toEqual(['new', 'new', 'new']);
    // Redelivery of the whole call plus one new turn, and the same turn twice in one call.
    const again = await trajectories.appendTurns([turn('t1', 0), turn('t1', 1), turn('t1', 3), turn('t1', 3)]);
    expect(again.map((r) => r.outcome)).toEqual(['duplicate', 'duplicate', 'new', 'duplicate']);
    expect(trajectories.appendStatements).toBe(2);

    const appended = bus.ofType('TrajectoryTurnAppended');
    expect(appended.map((m) => m.data)).toEqual(
      [0, 1, 2, 3].map((i) => expect.objectContaining({ turnId: `t1/${i}`, turnIndex: i, batchId: 'batch-0', promptId: 'prompt-t1' })),
    );
    expect(appended.every((m) => m.jobId === 'job-1' && !('content' in m.data))).toBe(true);

    const stored = await trajectories.trajectory('t1');
    expect(stored?.turns.map((t) => t.turnIndex)).toEqual([0, 1, 2, 3]);
    expect(stored?.turns[2].content).toEqual({ text: 'turn 2 of t1', n: 2 });
    expect(stored?.lastTurnIndex).toBe(3);
  });

  it('keeps last turn index, owner and weight versions from what was inserted, whatever the arrival order', async () => {
    await trajectories.startTrajectory(trajectory('t1'));
    await trajectories.appendTurns([turn('t1', 3, { rolloutId: 'rollout-1/dp0', weightVersion: 5, kind: 'model-output' })]);
    await trajectories.appendTurns([
      turn('t1', 0, { weightVersion: 4, kind: 'model-output' }),
      turn('t1', 1, { weightVersion: 4, kind: 'tool-call' }),
      turn('t1', 2, { weightVersion: 2, kind: 'tool-result', rolloutId: null }),
    ]);
    const t = (await trajectories.trajectory('t1'))!;
    expect(t.lastTurnIndex).toBe(3);
    expect(t.ownerRolloutId).toBe('rollout-1/dp0'); // the late, older turns do not take ownership back
    expect(t.minWeightVersion).toBe(4); // the tool result's version is not a policy sample
    expect(t.maxWeightVersion).toBe(5);
    expect(t.weightVersions).toEqual([2, 4, 5]);
  });

  it('refuses turns of unknown, closed or restarted trajectories and a second turn id at a taken index', async () => {
    await trajectories.startTrajectories([trajectory('open'), trajectory('done', { promptId: 'p-done' })]);
    await trajectories.appendTurns([turn('open', 0)]);
    await trajectories.setStatus('done', { status: 'completed' });
    const results = await trajectories.appendTurns([
      turn('ghost', 0),
      turn('done', 0),
      turn('open', 0, { turnId: 'other-id' }),
      turn('open', 2, { attempt: 7 }),
      turn('open', 1, { attempt: 0 }),
    ]);
    expect(results.map((r) => r.outcome)).toEqual(['unknown-trajectory', 'closed', 'index-taken', 'stale-attempt', 'new']);
  });

  it('allows only forward status transitions; repeating a status publishes nothing', async () => {
    await trajectories.startTrajectory(trajectory('t1'));
    await trajectories.setStatus('t1', { status: 'reassigned', rolloutId: 'rollout-2/dp0' });
    await trajectories.setStatus('t1', { status: 'completed' });
    const repeat = await trajectories.setStatus('t1', { status: 'completed' });
    expect(repeat.changed).toBe(false);
    await expect(trajectories.setStatus('t1', { status: 'in-flight' })).rejects.toBeInstanceOf(InvalidTransitionError);
    expect(bus.ofType('TrajectoryStatusChanged').map((m) => (m.data as { status: string }).status)).toEqual(['in-flight', 'reassigned', 'completed']);
    const t = (await trajectories.trajectory('t1'))!;
    expect(t.ownerRolloutId).toBe('rollout-2/dp0');
    expect(t.completedAt).not.toBeNull();
  });

  it('a continuation keeps the prefix or restarts from the prompt; a restart fences the old attempt', async () => {
    await trajectories.startTrajectories([trajectory('kept'), trajectory('restarted', { promptId: 'p-r' })]);
    for (const id of ['kept', 'restarted']) {
      await trajectories.appendTurns([turn(id, 0, { weightVersion: 1, kind: 'model-output' }), turn(id, 1, { weightVersion: 1, kind: 'tool-call' })]);
    }
    const kept = await trajectories.setStatus('kept', { status: 'reassigned', rolloutId: 'rollout-9/dp0', continuation: { weightVersion: 2, policy: 'keep' } });
    expect(kept.continuation).toEqual({ action: 'continue', reason: 'policy-keep' });
    expect((await trajectories.prefix('kept')).resumeFromTurn).toBe(2);

    const restarted = await trajectories.setStatus('restarted', {
      status: 'reassigned',
      rolloutId: 'rollout-9/dp0',
      continuation: { weightVersion: 2, policy: 'restart-from-prompt' },
    });
    expect(restarted.continuation?.action).toBe('restart-from-prompt');
    // The restart is an event (the kept continuation is not: nothing was dropped).
    expect(bus.ofType('TrajectoryRestartedFromPrompt').map((m) => m.data)).toEqual([
      {
        trajectoryId: 'restarted',
        batchId: 'batch-0',
        step: 0,
        promptId: 'p-r',
        sampleIndex: 0,
        attempt: 1,
        reason: 'policy-restart',
        policy: 'restart-from-prompt',
        droppedPolicyVersion: 1,
        weightVersion: 2,
        rolloutId: 'rollout-9/dp0',
      },
    ]);
    const prefix = await trajectories.prefix('restarted');
    expect(prefix).toMatchObject({
      turns: [],
      resumeFromTurn: 0,
      trajectory: { attempt: 1, minWeightVersion: null, prompt: { messages: [{ role: 'user', content: 'solve restarted' }] } },
    });
    // A late redelivery of an old turn stays a duplicate; the old attempt's writer is fenced out.
    const late = await trajectories.appendTurns([turn('restarted', 1, { weightVersion: 1 }), turn('restarted', 2, { turnId: 'zombie', attempt: 0 })]);
    expect(late.map((r) => r.outcome)).toEqual(['duplicate', 'stale-attempt']);
    // The new attempt starts again at index 0 with the new weights.
    expect((await trajectories.appendTurns([turn('restarted', 0, { turnId: 'r2/0', weightVersion: 2, attempt: 1 })]))[0].outcome).toBe('new');
    expect((await trajectories.trajectory('restarted'))!.turns.map((t) => t.turnId)).toEqual(['r2/0']);
  });

  it('returns exactly the completed trajectories of a batch within the staleness bound, with their turns', async () => {
    await trajectories.startTrajectories([
      trajectory('fresh', { promptId: 'p1' }),
      trajectory('stale', { promptId: 'p2' }),
      trajectory('running', { promptId: 'p3' }),
      trajectory('other-batch', { promptId: 'p1', batchId: 'batch-1' }),
    ]);
    await trajectories.appendTurns([
      turn('fresh', 0, { weightVersion: 9, kind: 'model-output' }),
      turn('stale', 0, { weightVersion: 6, kind: 'model-output' }),
      turn('stale', 1, { weightVersion: 10, kind: 'model-output' }),
      turn('running', 0, { weightVersion: 10, kind: 'model-output' }),
      turn('other-batch', 0, { weightVersion: 10, kind: 'model-output' }),
    ]);
    for (const id of ['fresh', 'stale', 'other-batch']) await trajectories.setStatus(id, { status: 'completed' });

    const batch = await trajectories.completedOfBatch('job-1', 'batch-0', { currentWeightVersion: 10, acceptance: { maxStaleness: 2 } });
    expect(batch.trajectories.map((t) => [t.trajectoryId, t.turns.length])).toEqual([['fresh', 1]]);
    expect(batch.stale).toEqual([{ trajectoryId: 'stale', staleness: 4 }]);
    const lenient = await trajectories.completedOfBatch('job-1', 'batch-0', { currentWeightVersion: 10, acceptance: { maxStaleness: 4 } });
    expect(lenient.trajectories.map((t) => t.trajectoryId)).toEqual(['fresh', 'stale']);
    expect(await trajectories.batchProgress('job-1', 'batch-0')).toEqual({ 'in-flight': 1, completed: 2, reassigned: 0, aborted: 0, total: 3 });
  });

  it('keeps the outcome a trajectory completed with and hands the trainer its training sample', async () => {
    await trajectories.startTrajectories([trajectory('scored', { promptId: 'p1' }), trajectory('text-only', { promptId: 'p2' })]);
    const spans = [
      { rolloutId: 'r0', weightVersion: 4, tokenIds: [7, 8, 2], logprobs: [-0.5, -0.25, 0], sampled: 3, context: 'prompt' as const, promptTokenIds: [1, 2, 3] },
    ];
    await trajectories.appendTurns([
      turn('scored', 0, { weightVersion: 4, kind: 'model-output', tokens: 3, spans }),
      turn('text-only', 0, { weightVersion: 4, kind: 'model-output' }),
    ]);
    await trajectories.setStatus('scored', { status: 'completed', outcome: { reward: 1, metadata: { problem: '3+4', answer: '7\u0000' } } });
    // A repeated completion changes nothing: the first outcome stays.
    expect((await trajectories.setStatus('scored', { status: 'completed', outcome: { reward: 0 } })).changed).toBe(false);
    await trajectories.setStatus('text-only', { status: 'completed' });

    const batch = await trajectories.completedOfBatch('job-1', 'batch-0', { currentWeightVersion: 4, acceptance: { maxStaleness: 1 } });
    expect(batch.trajectories.map((t) => [t.trajectoryId, t.reward, t.metadata])).toEqual([
      ['scored', 1, { problem: '3+4', answer: '7\u0000' }],
      ['text-only', null, null],
    ]);
    expect(batch.samples).toEqual([
      {
        trajectoryId: 'scored',
        reason: null,
        sample: {
          promptTokenIds: [1, 2, 3],
          responseTokenIds: [7, 8, 2],
          logprobs: [-0.5, -0.25, 0],
          lossMask: [1, 1, 1],
          versions: [4, 4, 4],
          reward: 1,
          metadata: { problem: '3+4', answer: '7\u0000' },
          exact: true,
        },
      },
      { trajectoryId: 'text-only', sample: null, reason: expect.stringMatching(/no token ids/) },
    ]);
  });

  it('prunes completed and aborted trajectories outside the retention window, never in-flight ones', async () => {
    for (let step = 0; step < 4; step++) {
      await trajectories.startTrajectories([
        trajectory(`s${step}-done`, { step, batchId: `batch-${step}` }),
        trajectory(`s${step}-running`, { step, batchId: `batch-${step}`, promptId: 'p-running' }),
      ]);
      await trajectories.appendTurns([turn(`s${step}-done`, 0), turn(`s${step}-done`, 1), turn(`s${step}-running`, 0)]);
      await trajectories.setStatus(`s${step}-done`, { status: 'completed' });
    }
    expect(await trajectories.prune({ jobId: 'job-1', keepSteps: 2, currentStep: 3 })).toEqual({ trajectories: 2, turns: 4 });
    expect(await trajectories.prune({ jobId: 'job-1', keepSteps: 2, currentStep: 3 })).toEqual({ trajectories: 0, turns: 0 });
    expect(await trajectories.trajectory('s1-done')).toBeNull();
    expect(await trajectories.trajectory('s2-done')).not.toBeNull();
    expect(await trajectories.trajectory('s0-running')).not.toBeNull();
    expect(await trajectories.prune({ jobId: 'other-job', keepSteps: 0, currentStep: 3 })).toEqual({ trajectories: 0, turns: 0 });
  });

  it('is usable without a bus', async () => {
    const quiet = new TrajectoryStore(store);
    await quiet.startTrajectory(trajectory('t1'));
    expect((await quiet.appendTurns([turn('t1', 0)]))[0].outcome).toBe('new');
  });
});
