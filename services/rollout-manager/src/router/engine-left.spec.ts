import { FakeInferenceEngine } from '@robustrl/testing/fake-inference-engine';
import { streamChat } from '@robustrl/testing/openai-client';
import { EnginePool } from './engine-pool';
import { OpenAiRouter, RouterLogger } from './openai-router';
import { RequestEvidence } from './request-evidence';
import { trajectoryIdOf } from './trajectory-identity';
import { InMemoryTrajectoryRecorder } from './trajectory-recorder';

/**
 * A request on an engine that leaves the pool (its machine confirmed faulty) or moves to another
 * address (its framework restarted it elsewhere) is given up at once and answered by the engine the pool
 * has now, not after the idle timeout: the process it waits on is no longer the engine, and one that is
 * shutting down may hold its connections open for good (vLLM's server waits for them to close). The
 * failure is not held against the engine's id.
 */
describe('an engine that leaves the pool or moves while a request is on it', () => {
  const IDLE_MS = 60_000;
  const quiet: RouterLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };
  let engines: FakeInferenceEngine[];
  let pool: EnginePool;
  let evidence: RequestEvidence;
  let router: OpenAiRouter;
  let url: string;

  beforeEach(async () => {
    engines = await Promise.all(['e1', 'e2'].map((id) => FakeInferenceEngine.start({ id, tokensPerReply: 4, tokenIntervalMs: 5 })));
    pool = new EnginePool(
      engines.map((e) => ({ id: e.id, baseUrl: e.url, weightVersion: 1 })),
      { probeIntervalMs: 0, probeTimeoutMs: 300 },
    );
    evidence = new RequestEvidence(Date.now());
    router = new OpenAiRouter({
      pool,
      recorder: new InMemoryTrajectoryRecorder(),
      upstreamIdleTimeoutMs: IDLE_MS,
      noEngineDeadlineMs: 10_000,
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

  const identity = { 'x-robustrl-job': 'job-1', 'x-robustrl-prompt': 'p', 'x-robustrl-sample': '0', 'x-robustrl-step': '1' };
  const body = { model: 'fake-model', messages: [{ role: 'user', content: 'hello' }], stream: true };
  const e1Failures = () => evidence.take(Date.now(), pool.snapshot()).find((r) => r.engineId === 'e1')?.failedRequests ?? 0;

  /** A request held by e1 (it never answers), once it is on e1; the answer in a box (awaiting it would wait for it). */
  async function heldOnE1(): Promise<{ answer: ReturnType<typeof streamChat> }> {
    pool.assign(trajectoryIdOf('job-1', 'p', 0), 'e1');
    engines[0].holdNext(1);
    const answer = streamChat(url, body, identity);
    while (pool.get('e1')?.inFlight !== 1) await new Promise((r) => setTimeout(r, 5));
    return { answer };
  }

  it('left the pool: the request is answered by another engine at once, not after the idle timeout', async () => {
    const { answer } = await heldOnE1();
    const left = Date.now();
    pool.remove('e1');
    const got = await answer;
    expect({ done: got.done, engine: got.engineId }).toEqual({ done: true, engine: 'e2' });
    expect(Date.now() - left).toBeLessThan(5_000);
    expect(router.stats.failovers).toBe(1);
  });

  it('moved to another address: the request follows it there, and the engine is neither taken out nor blamed', async () => {
    const { answer } = await heldOnE1();
    // e1's framework started it again elsewhere: the same id at a new address (here, e2's server).
    pool.add({ id: 'e1', baseUrl: engines[1].url, weightVersion: 1 });
    const got = await answer;
    expect(got.done).toBe(true);
    expect(engines[1].generationRequests).toBeGreaterThanOrEqual(1);
    expect(pool.get('e1')).toMatchObject({ alive: true, baseUrl: engines[1].url });
    expect(e1Failures()).toBe(0);
  });
});
