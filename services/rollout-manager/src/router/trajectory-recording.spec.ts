import { EnginePool } from './engine-pool';
import { RouterLogger, RouterStats } from './router-reporting';
import { TrajectoryIdentity } from './trajectory-identity';
import { InMemoryTrajectoryRecorder } from './trajectory-recorder';
import { TrajectoryRecording } from './trajectory-recording';

describe('TrajectoryRecording: the first prompts of completions trajectories are bounded', () => {
  const quiet: RouterLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };
  const identity = (prompt: string): TrajectoryIdentity => ({
    trajectoryId: `job/${prompt}/0`,
    jobId: 'job',
    promptId: prompt,
    sampleIndex: 0,
    batchId: 'b',
    step: 0,
  });

  it('forgets the oldest beyond its limit, and a forgotten trajectory goes on from its stored turns', async () => {
    const recorder = new InMemoryTrajectoryRecorder();
    const pool = new EnginePool([{ id: 'e1', baseUrl: 'http://e1', weightVersion: 1 }], { probeIntervalMs: 0, probe: async () => true });
    const stats: RouterStats = { requests: 0, failovers: 0, replays: 0, recordingErrors: 0, noEngine503: 0 };
    const recording = new TrajectoryRecording(recorder, pool, stats, quiet, { policy: 'keep' }, 1);
    const kept = () => (recording as unknown as { tokenBases: Map<string, number[]> }).tokenBases;

    const first = await recording.prepare('completions', { prompt: [1, 2, 3] }, identity('a'));
    expect(first).toEqual({ kind: 'generate', outputIndex: 0, attempt: 0 });
    const span = { rolloutId: 'e1', weightVersion: 1, tokenIds: [7, 8], logprobs: [null, null], sampled: null, context: 'prompt' as const };
    await recording.recordAnswer(
      identity('a'),
      'completions',
      { outputIndex: 0, attempt: 0 },
      {
        content: ' x',
        finishReason: 'stop',
        tokens: 2,
        engines: [pool.get('e1')!],
        spans: [span],
      },
    );
    expect([...kept().keys()]).toEqual(['job/a/0']);
    // Another trajectory pushes the first one's prompt out: the limit is one.
    await recording.prepare('completions', { prompt: [9] }, identity('b'));
    expect([...kept().keys()]).toEqual(['job/b/0']);

    // The first goes on (its prompt, its answer's ids, a tool's ids): split against what is stored.
    const next = await recording.prepare('completions', { prompt: [1, 2, 3, 7, 8, 40, 41] }, identity('a'));
    expect(next).toEqual({ kind: 'generate', outputIndex: 2, attempt: 0 });
    const stored = recorder.trajectory('job/a/0');
    expect(stored.start?.prompt).toEqual([1, 2, 3]);
    expect(stored.turns.map((t) => [t.turnIndex, t.kind, t.content])).toEqual([
      [0, 'model-output', ' x'],
      [1, 'tool-result', { tokenIds: [40, 41] }],
    ]);
    expect(kept().size).toBe(1);
    await pool.stop();
  });
});
