import { ChatMessage, chatReplyFor, completionReplyFor, FakeInferenceEngine, logprobOf } from '@robustrl/testing/fake-inference-engine';
import { promptIdsOf, tokenIdOf } from '@robustrl/testing/fake-token-ids';
import { streamChat, streamCompletion } from '@robustrl/testing/openai-client';
import { EnginePool } from './engine-pool';
import { OpenAiRouter, RouterLogger } from './openai-router';
import { trajectoryIdOf } from './trajectory-identity';
import { InMemoryTrajectoryRecorder } from './trajectory-recorder';

/**
 * A recorded stream: the router asks the engine for the ids and log-probs it records, and the caller
 * gets the engine's stream as if they had not been asked for (engine-attempt.ts, the full path: every
 * event parsed, stripped, serialised again). Three fake vLLM engines that answer ids and log-probs, the
 * router over real HTTP on 127.0.0.1, the recorder in memory.
 */
describe('OpenAiRouter: a recorded stream', () => {
  let engines: FakeInferenceEngine[];
  let pool: EnginePool;
  let router: OpenAiRouter;
  let recorder: InMemoryTrajectoryRecorder;
  let url: string;
  const quiet: RouterLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

  const start = async (tokensPerReply = 12) => {
    engines = await Promise.all(
      ['e1', 'e2', 'e3'].map((id) => FakeInferenceEngine.start({ id, tokenIds: true, logprobs: true, tokensPerReply, tokenIntervalMs: 5 })),
    );
    pool = new EnginePool(
      engines.map((e) => ({ id: e.id, baseUrl: e.url, weightVersion: 3 })),
      { probeIntervalMs: 0, probeTimeoutMs: 300 },
    );
    recorder = new InMemoryTrajectoryRecorder();
    router = new OpenAiRouter({ pool, recorder, noEngineDeadlineMs: 2_000, logger: quiet });
    url = await router.listen(0, '127.0.0.1');
  };

  afterEach(async () => {
    await router.close();
    for (const e of engines) e.kill();
    await pool.stop();
  });

  const identity = (prompt: string) => ({ 'x-robustrl-job': 'job-1', 'x-robustrl-prompt': prompt, 'x-robustrl-sample': '0' });
  const messages = (text: string): ChatMessage[] => [
    { role: 'system', content: 'you are a test' },
    { role: 'user', content: text },
  ];
  const engineById = (id: string | null) => engines.find((e) => e.id === id)!;
  /** Events compared without what differs between two answers of the same engine (id, created stamp). */
  const shape = (events: string[]) => events.map((e) => e.replace(/"id":"[^"]*"/, '').replace(/"created":\d+/, ''));
  const answerTurn = (prompt: string) => recorder.trajectory(trajectoryIdOf('job-1', prompt, 0)).turns.find((t) => t.rolloutId !== null)!;

  it('relays the stream as the caller asked it (no ids, no log-probs) and records every id and log-prob', async () => {
    await start();
    const body = { model: 'fake-model', messages: messages('record me'), stream: true };
    const direct = await streamChat(engines[0].url, body, {});
    const routed = await streamChat(url, body, identity('p1'));
    const reply = chatReplyFor(messages('record me'));
    expect(routed.text).toBe(reply.tokens.join(''));
    // The router asked for both, to record them; the caller sees the engine's stream as if it had not.
    const asked = engineById(routed.engineId).requests.at(-1)!.body;
    expect(asked).toMatchObject({ return_token_ids: true, logprobs: true });
    expect(shape(routed.events)).toEqual(shape(direct.events));
    expect(routed.events.join('\n')).not.toMatch(/token_ids|"logprobs":\{/);

    const turn = answerTurn('p1');
    expect(turn.content).toEqual({ role: 'assistant', content: reply.tokens.join('') });
    expect(turn.tokens).toBe(12);
    expect(turn.spans).toEqual([
      {
        rolloutId: routed.engineId,
        weightVersion: 3,
        tokenIds: reply.tokens.map(tokenIdOf),
        logprobs: reply.tokens.map(logprobOf),
        sampled: null,
        context: 'prompt',
        promptTokenIds: promptIdsOf(JSON.stringify(messages('record me'))),
      },
    ]);
  });

  it('forwards the log-probs where the caller asked for them, and records the same', async () => {
    await start();
    const body = { model: 'fake-model', messages: messages('with logprobs'), stream: true, logprobs: true };
    const direct = await streamChat(engines[0].url, body, {});
    const routed = await streamChat(url, body, identity('p2'));
    expect(shape(routed.events)).toEqual(shape(direct.events));
    expect(routed.events.some((e) => e.includes('"logprobs":{"content":[{'))).toBe(true);
    expect(answerTurn('p2').spans![0]!.logprobs).toEqual(chatReplyFor(messages('with logprobs')).tokens.map(logprobOf));
  });

  it('completions: relayed as asked and recorded whole', async () => {
    await start();
    const routed = await streamCompletion(url, { model: 'fake-model', prompt: 'Once upon a time', stream: true, max_tokens: 8 }, identity('p3'));
    const reply = completionReplyFor('Once upon a time').slice(0, 8);
    expect(routed.text).toBe(reply.join(''));
    const turn = answerTurn('p3');
    expect(turn.content).toBe(reply.join(''));
    expect(turn.spans![0]).toMatchObject({ tokenIds: reply.map(tokenIdOf), logprobs: reply.map(logprobOf) });
  });

  it('a recorded stream cut mid-way goes on on another engine: the turn holds every id and log-prob once', async () => {
    await start(30);
    const body = { model: 'fake-model', messages: messages('long record'), stream: true };
    const reply = chatReplyFor(messages('long record'), { tokensPerReply: 30 });
    const routed = await streamChat(url, body, identity('p4'), { afterChunks: 10, then: (id) => engineById(id).kill() });
    expect(routed.text).toBe(reply.tokens.join(''));
    const turn = answerTurn('p4');
    expect(turn.content).toEqual({ role: 'assistant', content: reply.tokens.join('') });
    expect(turn.spans!.length).toBe(2);
    expect(turn.spans!.flatMap((s) => s.tokenIds)).toEqual(reply.tokens.map(tokenIdOf));
    expect(turn.spans!.flatMap((s) => s.logprobs)).toEqual(reply.tokens.map(logprobOf));
  });
});
