import { ChatMessage, chatReplyFor, FakeInferenceEngine } from '@robustrl/testing/fake-inference-engine';
import { promptIdsOf, tokenIdOf } from '@robustrl/testing/fake-token-ids';
import { streamChat, streamCompletion } from '@robustrl/testing/openai-client';
import { EnginePool } from './engine-pool';
import { OpenAiRouter, RouterLogger } from './openai-router';
import { ThroughputMeter } from './throughput-meter';
import { LeanRelay } from './lean-relay';
import { adapterFor } from './engines/adapters';
import { asSent } from './engines/engine-adapter';
import { StreamSplice } from './stream-splice';

/**
 * Streams nobody records go the lean way (lean-relay.ts): relayed as the engines send them, id lists
 * cut out, parsed only when a failover or an event needs it. Three fake engines that answer vLLM's
 * `return_token_ids`, the router over real HTTP on 127.0.0.1, no recorder.
 */
describe('OpenAiRouter: the lean path of a stream nobody records', () => {
  let engines: FakeInferenceEngine[];
  let pool: EnginePool;
  let router: OpenAiRouter;
  let meter: ThroughputMeter;
  let url: string;
  const quiet: RouterLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

  const start = async (options: { toolRounds?: number; tokensPerReply?: number } = {}) => {
    engines = await Promise.all(
      ['e1', 'e2', 'e3'].map((id) =>
        FakeInferenceEngine.start({
          id,
          tokenIds: true,
          toolRounds: options.toolRounds ?? 0,
          tokensPerReply: options.tokensPerReply ?? 12,
          tokenIntervalMs: 5,
        }),
      ),
    );
    pool = new EnginePool(
      engines.map((e) => ({ id: e.id, baseUrl: e.url, weightVersion: 3 })),
      { probeIntervalMs: 0, probeTimeoutMs: 300 },
    );
    meter = new ThroughputMeter(Date.now());
    router = new OpenAiRouter({ pool, noEngineDeadlineMs: 2_000, logger: quiet, meter });
    url = await router.listen(0, '127.0.0.1');
  };

  afterEach(async () => {
    await router.close();
    for (const e of engines) e.kill();
    await pool.stop();
  });

  const messages = (text: string): ChatMessage[] => [
    { role: 'system', content: 'you are a test' },
    { role: 'user', content: text },
  ];
  const engineById = (id: string | null) => engines.find((e) => e.id === id)!;
  const tokensCounted = () => meter.take(Date.now(), pool.snapshot()).reduce((sum, s) => sum + s.tokensPerSecond * s.windowSeconds, 0);

  it('relays what the engine sent, less the ids the caller did not ask for; counts the tokens', async () => {
    await start();
    const body = { model: 'fake-model', messages: messages('hello'), stream: true };
    const direct = await streamChat(engines[0].url, body, {});
    const routed = await streamChat(url, body, {});
    expect(routed.text).toBe(direct.text);
    expect(routed.finishReason).toBe('stop');
    expect(routed.done).toBe(true);
    // The router asked for ids (a failover continues from them); the caller did not, and sees none.
    expect(engineById(routed.engineId).requests.at(-1)!.body.return_token_ids).toBe(true);
    expect(routed.events.filter((e) => e.includes('token_ids'))).toEqual([]);
    // Event for event what the engine sends without ids (the ids and created stamps aside).
    const shape = (events: string[]) => events.map((e) => e.replace(/"id":"[^"]*"/, '').replace(/"created":\d+/, ''));
    expect(shape(routed.events)).toEqual(shape(direct.events));
    expect(Math.round(tokensCounted())).toBe(12);
  });

  it('keeps the ids where the caller asked for them', async () => {
    await start();
    const body = { model: 'fake-model', messages: messages('ids please'), stream: true, return_token_ids: true };
    const routed = await streamChat(url, body, {});
    const expected = chatReplyFor(messages('ids please'));
    const sent = routed.events
      .filter((e) => e.includes('"token_ids"'))
      .map((e) => (JSON.parse(e) as { choices: Array<{ token_ids: number[] }> }).choices[0]!.token_ids[0]);
    expect(sent).toEqual(expected.tokens.map(tokenIdOf));
    expect(routed.events[0]).toContain(`"prompt_token_ids":[${promptIdsOf(JSON.stringify(messages('ids please'))).join(',')}]`);
  });

  it('a stream cut after lean events goes on from the exact ids on another engine: same text, nothing lost or repeated', async () => {
    await start({ tokensPerReply: 30 });
    const body = { model: 'fake-model', messages: messages('long answer'), stream: true };
    const expected = chatReplyFor(messages('long answer'), { tokensPerReply: 30 });
    const routed = await streamChat(url, body, {}, { afterChunks: 10, then: (id) => engineById(id).kill() });
    expect(routed.text).toBe(expected.tokens.join(''));
    expect(routed.finishReason).toBe('stop');
    expect(routed.ids.size).toBe(1);
    expect(routed.roleChunks).toBe(1);
    expect(routed.events.filter((e) => e.includes('token_ids'))).toEqual([]);
    const survivor = engines.find((e) => e.id !== routed.engineId && e.requests.length > 0)!;
    const continuation = survivor.requests[0]!;
    // Continued from ids: the prompt's own, then every token forwarded before the cut (the kill lands after at least 10).
    expect(continuation.path).toBe('/v1/completions');
    const prompt = continuation.body.prompt as number[];
    const promptIds = promptIdsOf(JSON.stringify(messages('long answer')));
    expect(prompt.slice(0, promptIds.length)).toEqual(promptIds);
    const sampled = prompt.slice(promptIds.length);
    expect(sampled.length).toBeGreaterThanOrEqual(10);
    expect(sampled).toEqual(expected.tokens.slice(0, sampled.length).map(tokenIdOf));
    expect(Math.round(tokensCounted())).toBe(30);
  });

  it('an event that needs parsing (a tool call) takes the full path from there: the call is forwarded whole', async () => {
    await start({ toolRounds: 1, tokensPerReply: 12 });
    const body = { model: 'fake-model', messages: messages('use a tool'), stream: true };
    const direct = await streamChat(engines[0].url, body, {});
    expect(direct.message.tool_calls).toHaveLength(1);
    const routed = await streamChat(url, body, {});
    expect(routed.message).toEqual(direct.message);
    expect(routed.finishReason).toBe('tool_calls');
    // The held-back call goes out in one event, as the full path sends it.
    expect(routed.events.filter((e) => e.includes('"tool_calls":['))).toHaveLength(1);
  });

  it('completions: relayed lean, and continued from ids after a cut', async () => {
    await start({ tokensPerReply: 20 });
    const body = { model: 'fake-model', prompt: 'Once upon a time', stream: true, max_tokens: 18 };
    const expected = await streamCompletion(engines[0].url, body, {});
    const before = engines.map((e) => e.requests.length);
    const routed = await streamCompletion(url, body, {}, { afterChunks: 6, then: (id) => engineById(id).kill() });
    expect(routed.text).toBe(expected.text);
    expect(routed.finishReason).toBe('length');
    const survivor = engines.find((e, i) => e.id !== routed.engineId && e.requests.length > before[i]!)!;
    const continuation = survivor.requests.at(-1)!.body;
    expect(Array.isArray(continuation.prompt)).toBe(true);
    expect(continuation.max_tokens).toBe(18 - ((continuation.prompt as number[]).length - promptIdsOf('Once upon a time').length));
  });

  it('the answer of a lean stream reads its content from the kept events only when asked', () => {
    const body = { model: 'm', messages: [], stream: true };
    const splice = new StreamSplice('chat');
    const relay = LeanRelay.of({ api: 'chat', body }, asSent('chat', body), adapterFor('vllm'), splice)!;
    const chunk = (delta: object, ids: number[] | null, finish: string | null = null) =>
      JSON.stringify({
        id: 'c',
        object: 'chat.completion.chunk',
        created: 1,
        model: 'm',
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish, ...(ids ? { token_ids: ids } : {}) }],
      });
    splice.beginAttempt({ id: 'e1', weightVersion: 2 }, 'prompt');
    for (const data of [
      chunk({ role: 'assistant', content: '' }, null),
      chunk({ content: 'Hi' }, [5]),
      chunk({ content: ' there' }, [6, 7]),
      chunk({}, [], 'stop'),
    ]) {
      expect(relay.accept(data)).not.toBeNull();
    }
    expect(relay.active).toBe(true);
    const answer = relay.answer([]);
    expect(answer.tokens).toBe(3);
    expect(splice.text).toBe(''); // nothing parsed yet
    expect(answer.content).toEqual({ role: 'assistant', content: 'Hi there' });
    expect(answer.finishReason).toBe('stop');
    expect(answer.spans).toMatchObject([{ rolloutId: 'e1', tokenIds: [5, 6, 7] }]);
    expect(relay.active).toBe(false);
  });

  it('takes no lean path where the answer is recorded, output was forwarded, or several choices are asked', () => {
    const body = { model: 'm', messages: [], stream: true };
    const vllm = adapterFor('vllm');
    expect(LeanRelay.of({ api: 'chat', body, beforeAnswer: async () => undefined }, asSent('chat', body), vllm, new StreamSplice('chat'))).toBeNull();
    expect(LeanRelay.of({ api: 'chat', body: { ...body, n: 2 } }, asSent('chat', body), vllm, new StreamSplice('chat'))).toBeNull();
    expect(LeanRelay.of({ api: 'chat', body }, asSent('chat', body), adapterFor('llama.cpp'), new StreamSplice('chat'))).toBeNull();
    const started = new StreamSplice('chat');
    started.beginAttempt({ id: 'e1', weightVersion: 1 }, 'prompt');
    started.accept(
      { id: 'c', choices: [{ index: 0, delta: { role: 'assistant', content: 'x' } }] },
      { ids: [], logprobs: [], sampledSoFar: null, promptTokenIds: null },
    );
    expect(LeanRelay.of({ api: 'chat', body }, asSent('chat', body), vllm, started)).toBeNull();
  });
});
