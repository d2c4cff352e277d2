import { FakeInferenceEngine } from '@robustrl/testing/fake-inference-engine';
import { streamChat } from '@robustrl/testing/openai-client';
import { EnginePool } from './engine-pool';
import { AttemptFailure } from './engine-attempt';
import { queuedOnBusyEngine } from './failover';
import { OpenAiRouter, RouterLogger } from './openai-router';
import { RequestEvidence } from './request-evidence';
import { trajectoryIdOf } from './trajectory-identity';
import { InMemoryTrajectoryRecorder } from './trajectory-recorder';

/**
 * A stream that gets nothing for the idle timeout is given up on either way; what it says about its
 * engine depends on the engine's other streams. Still producing for them, the engine had the request in
 * its queue: it is busy, stays in the pool, and the failure is not held against it (the detector's
 * `rollout-requests` rule would count it). Silent everywhere, it is hung: out of the pool.
 */
describe('a request silent for the idle timeout', () => {
  const IDLE_MS = 300;
  const quiet: RouterLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };
  let engines: FakeInferenceEngine[];
  let pool: EnginePool;
  let evidence: RequestEvidence;
  let router: OpenAiRouter;
  let url: string;
  let dead: string[];

  beforeEach(async () => {
    // A stream of 40 tokens every 20 ms: about 0.8 s of bytes, well past the idle timeout.
    engines = await Promise.all(['e1', 'e2'].map((id) => FakeInferenceEngine.start({ id, tokensPerReply: 40, tokenIntervalMs: 20 })));
    dead = [];
    pool = new EnginePool(
      engines.map((e) => ({ id: e.id, baseUrl: e.url, weightVersion: 1 })),
      { probeIntervalMs: 0, probeTimeoutMs: 300, onChange: (e, change) => void (change === 'dead' && dead.push(e.id)) },
    );
    evidence = new RequestEvidence(Date.now());
    router = new OpenAiRouter({
      pool,
      recorder: new InMemoryTrajectoryRecorder(),
      upstreamIdleTimeoutMs: IDLE_MS,
      noEngineDeadlineMs: 2_000,
      logger: quiet,
      evidence,
    });
    url = await router.listen(0, '127.0.0.1');
  });

  afterEach(async () => {
    await router.close();
    for (const e of engines) e.kill();
    await pool.stop();
  });

  const identity = (prompt: string) => ({ 'x-robustrl-job': 'job-1', 'x-robustrl-prompt': prompt, 'x-robustrl-sample': '0', 'x-robustrl-step': '1' });
  const body = (text: string) => ({ model: 'fake-model', messages: [{ role: 'user', content: text }], stream: true });
  const e1Failures = () => evidence.take(Date.now(), pool.snapshot()).find((r) => r.engineId === 'e1')?.failedRequests ?? 0;

  it('on an engine still streaming for others: it was queued — answered elsewhere, the engine stays in and is not blamed', async () => {
    pool.assign(trajectoryIdOf('job-1', 'busy', 0), 'e1');
    pool.assign(trajectoryIdOf('job-1', 'queued', 0), 'e1');
    const busy = streamChat(url, body('a long answer'), identity('busy'));
    while (engines[0].openGenerations === 0) await new Promise((r) => setTimeout(r, 5));
    engines[0].holdNext(1);
    const queued = await streamChat(url, body('another answer'), identity('queued'));
    expect({ done: queued.done, engine: queued.engineId }).toEqual({ done: true, engine: 'e2' });
    const first = await busy;
    expect({ done: first.done, engine: first.engineId }).toEqual({ done: true, engine: 'e1' });
    expect(router.stats.failovers).toBe(1);
    expect(dead).toEqual([]);
    expect(pool.get('e1')?.alive).toBe(true);
    expect(e1Failures()).toBe(0);
  });

  it('on an engine silent for everyone: it is hung — answered elsewhere, the engine taken out and blamed', async () => {
    pool.assign(trajectoryIdOf('job-1', 'earlier', 0), 'e1');
    pool.assign(trajectoryIdOf('job-1', 'queued', 0), 'e1');
    // e1 served before (an engine is judged only once it has), and has been quiet since.
    expect((await streamChat(url, body('a long answer'), identity('earlier'))).engineId).toBe('e1');
    await new Promise((r) => setTimeout(r, 100));
    engines[0].holdNext(1);
    const queued = await streamChat(url, body('another answer'), identity('queued'));
    expect({ done: queued.done, engine: queued.engineId }).toEqual({ done: true, engine: 'e2' });
    expect(router.stats.failovers).toBe(1);
    expect(dead).toEqual(['e1']);
    expect(e1Failures()).toBe(1);
  });
});

describe('queuedOnBusyEngine', () => {
  const silent: AttemptFailure = { kind: 'failed', reason: 'no bytes for 300 ms', engineDown: true, silent: true };
  it.each([
    ['silent, the engine sent for another stream 100 ms ago', true, silent, 9_900],
    ['silent, the engine last sent 300 ms ago (as long as the idle timeout)', false, silent, 9_700],
    ['silent, the engine never sent anything', false, silent, undefined],
    ['a cut connection, the engine busy', false, { ...silent, silent: false }, 9_900],
  ])('%s: %s', (_, expected, failure, lastBytesAt) => {
    expect(queuedOnBusyEngine(failure, lastBytesAt, 10_000, 300)).toBe(expected);
  });
});
