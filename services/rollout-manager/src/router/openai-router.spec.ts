import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { InProcessBus } from '@robustrl/bus';
import { decodeMessage, RobustrlMessage, Topics } from '@robustrl/contracts';
import { HttpAuth, httpAuthFromEnv } from '@robustrl/service-kit';
import { ChatMessage, chatReplyFor, FakeInferenceEngine, toolResultFor } from '@robustrl/testing/fake-inference-engine';
import { agentLoop, chat, expectedConversation, post, streamChat, streamCompletion } from '@robustrl/testing/openai-client';
import { EnginePool } from './engine-pool';
import { ContinuationSettings, OpenAiRouter, RouterLogger } from './openai-router';
import { trajectoryIdOf } from './trajectory-identity';
import { ContinuationRequest, InMemoryTrajectoryRecorder, RecordedTurn, RecordRefusedError } from './trajectory-recorder';
import { turnKey } from './turn-plan';

/** The router against three fake engines over real HTTP on 127.0.0.1, the recorder in memory, the bus in process. */
describe('OpenAiRouter', () => {
  let engines: FakeInferenceEngine[];
  let pool: EnginePool;
  let recorder: InMemoryTrajectoryRecorder;
  let bus: InProcessBus;
  let router: OpenAiRouter;
  let url: string;
  const quiet: RouterLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

  const start = async (
    options: {
      toolRounds?: number;
      tokensPerReply?: number;
      tokenIntervalMs?: number;
      noEngineDeadlineMs?: number;
      continuation?: ContinuationSettings;
      recorder?: InMemoryTrajectoryRecorder;
      auth?: HttpAuth;
    } = {},
  ) => {
    engines = await Promise.all(
      ['e1', 'e2', 'e3'].map((id, i) =>
        FakeInferenceEngine.start({
          id,
          toolRounds: options.toolRounds ?? 0,
          tokensPerReply: options.tokensPerReply ?? 12,
          tokenIntervalMs: options.tokenIntervalMs ?? 5,
          weightVersion: 7 + i,
        }),
      ),
    );
    pool = new EnginePool(
      engines.map((e, i) => ({ id: e.id, baseUrl: e.url, weightVersion: 7 + i })),
      { probeIntervalMs: 0, probeTimeoutMs: 300 },
    );
    recorder = options.recorder ?? new InMemoryTrajectoryRecorder();
    bus = new InProcessBus();
    router = new OpenAiRouter({
      pool,
      recorder,
      bus,
      noEngineDeadlineMs: options.noEngineDeadlineMs ?? 2_000,
      logger: quiet,
      ...(options.continuation ? { continuation: options.continuation } : {}),
      ...(options.auth ? { auth: options.auth } : {}),
    });
    url = await router.listen(0, '127.0.0.1');
  };

  afterEach(async () => {
    await router.close();
    for (const e of engines) e.kill();
    await pool.stop();
    await bus.close();
  });

  const identity = (prompt: string, sample = 0) => ({
    'x-robustrl-job': 'job-1',
    'x-robustrl-prompt': prompt,
    'x-robustrl-sample': String(sample),
    'x-robustrl-step': '4',
  });
  const engineById = (id: string | null) => engines.find((e) => e.id === id)!;
  const prompt = (text: string): ChatMessage[] => [
    { role: 'system', content: 'you are a test' },
    { role: 'user', content: text },
  ];
  const published = (type: string): RobustrlMessage[] =>
    bus
      .read(Topics.trajectories)
      .map((r) => decodeMessage(r.value))
      .filter((d): d is { ok: true; message: RobustrlMessage } => d.ok && d.message.type === type)
      .map((d) => d.message);

  it('answers non-streaming and streaming chat exactly as an engine does, and records the turn', async () => {
    await start();
    const body = { model: 'fake-model', messages: prompt('hello') };
    const direct = await chat(engines[0].url, body, {});
    const viaRouter = await chat(url, body, identity('p1'));
    expect(viaRouter.message).toEqual(direct.message);
    expect(viaRouter.finishReason).toBe('stop');
    const streamed = await streamChat(url, { ...body, stream: true }, identity('p2'));
    const streamedDirect = await streamChat(engines[1].url, { ...body, stream: true }, {});
    expect(streamed.text).toBe(streamedDirect.text);
    expect(streamed.text).toBe(direct.message.content);
    expect(streamed.finishReason).toBe('stop');
    expect(streamed.done).toBe(true);

    const t1 = recorder.trajectory(trajectoryIdOf('job-1', 'p1', 0));
    expect(t1.start).toMatchObject({ jobId: 'job-1', promptId: 'p1', sampleIndex: 0, step: 4, batchId: 'step-4', prompt: body.messages });
    expect(t1.turns).toHaveLength(1);
    expect(t1.turns[0]).toMatchObject({ turnIndex: 0, kind: 'model-output', content: direct.message, tokens: 12 });
    expect(['e1', 'e2', 'e3']).toContain(t1.turns[0].rolloutId);
  });

  it("behind API keys: 401 in OpenAI's shape without a valid key, served with one, /health open", async () => {
    const key = 'loop-api-key-0123456789';
    await start({ auth: httpAuthFromEnv({ ROBUSTRL_ROUTER_TOKENS: key }, '0.0.0.0', 'ROBUSTRL_ROUTER') });
    const body = { model: 'm', messages: prompt('p-auth') };
    const refusedHeaders: Array<Record<string, string>> = [{}, { authorization: 'Bearer not-the-key-0123456789' }];
    for (const headers of refusedHeaders) {
      const refused = await post(url, '/v1/chat/completions', body, { ...identity('p-auth'), ...headers });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(await refused.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'invalid_api_key' } });
    }
    expect((await fetch(`${url}/v1/models`)).status).toBe(401);
    expect(recorder.appendLog).toHaveLength(0);
    expect(engines.reduce((n, e) => n + e.requests.length, 0)).toBe(0);

    const answer = await chat(url, body, { ...identity('p-auth'), authorization: `Bearer ${key}` });
    expect(answer.finishReason).toBe('stop');
    // The probe tells liveness only; which engines, where and at which version needs the key.
    const probe = await fetch(`${url}/health`);
    expect(probe.status).toBe(200);
    expect(await probe.json()).toEqual({ alive: engines.length });
    expect((await fetch(`${url}/v1/engines`)).status).toBe(401);
    const listed = (await (await fetch(`${url}/v1/engines`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
      engines: Array<{ baseUrl: string }>;
    };
    expect(listed.engines.map((e) => e.baseUrl).sort()).toEqual(engines.map((e) => e.url).sort());
  });

  it('scoped keys: the generation key lists engines but cannot add or remove one (403); an admin key can; a read key cannot generate', async () => {
    const [generation, admin, read] = ['loop-api-key-0123456789', 'operator-admin-0123456789', 'dashboard-read-0123456789'];
    await start({
      auth: httpAuthFromEnv(
        { ROBUSTRL_ROUTER_TOKENS: generation, ROBUSTRL_ROUTER_ADMIN_TOKENS: admin, ROBUSTRL_ROUTER_READ_TOKENS: read },
        '0.0.0.0',
        'ROBUSTRL_ROUTER',
      ),
    });
    const as = (token: string, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${token}`, ...extra });
    const rogue = { url: 'http://10.9.9.9:8000', labels: { machine_id: 'trainer-0' } };
    const before = (await (await fetch(`${url}/workers`, { headers: as(generation) })).json()) as { total: number };
    expect(before.total).toBe(engines.length);

    const attempts = [
      fetch(`${url}/workers`, { method: 'POST', headers: as(generation, { 'content-type': 'application/json' }), body: JSON.stringify(rogue) }),
      fetch(`${url}/add_worker?url=${encodeURIComponent(rogue.url)}`, { method: 'POST', headers: as(generation) }),
      fetch(`${url}/workers/${encodeURIComponent(engines[0].url)}`, { method: 'DELETE', headers: as(generation) }),
      fetch(`${url}/remove_worker?url=${encodeURIComponent(engines[0].url)}`, { method: 'POST', headers: as(generation) }),
      fetch(`${url}/workers`, { method: 'POST', headers: as(read, { 'content-type': 'application/json' }), body: JSON.stringify(rogue) }),
    ];
    for (const refused of await Promise.all(attempts)) {
      expect(refused.status).toBe(403);
      expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="robustrl", error="insufficient_scope", scope="admin"');
      expect(await refused.json()).toMatchObject({ error: { code: 'insufficient_scope' } });
    }
    const listed = (await (await fetch(`${url}/v1/engines`, { headers: as(read) })).json()) as { engines: Array<{ baseUrl: string; machineId: string }> };
    expect(listed.engines.map((e) => e.baseUrl).sort()).toEqual(engines.map((e) => e.url).sort());

    // A read key generates nothing; the generation key does.
    const body = { model: 'm', messages: prompt('p-scope') };
    expect((await post(url, '/v1/chat/completions', body, { ...identity('p-scope'), ...as(read) })).status).toBe(403);
    expect(engines.reduce((n, e) => n + e.requests.length, 0)).toBe(0);
    expect((await chat(url, body, { ...identity('p-scope'), ...as(generation) })).finishReason).toBe('stop');

    // The operator's admin key changes membership.
    const added = await fetch(`${url}/workers`, { method: 'POST', headers: as(admin, { 'content-type': 'application/json' }), body: JSON.stringify(rogue) });
    expect(added.status).toBe(202);
    const after = (await (await fetch(`${url}/workers`, { headers: as(read) })).json()) as { total: number };
    expect(after.total).toBe(engines.length + 1);
  });

  it('a whole answer nobody records: sent to the engine as the caller sent it, no ids asked for', async () => {
    await start();
    const body = { model: 'fake-model', messages: prompt('lean') };
    const res = await post(url, '/v1/chat/completions', body, {});
    const text = await res.text();
    const engine = engineById(res.headers.get('x-robustrl-rollout'));
    const sent = engine.requests.at(-1)!.body;
    expect(sent).toEqual(body);
    const answer = JSON.parse(text) as { choices: Array<{ message: { content: string } }> };
    expect(answer.choices[0].message.content).not.toBe('');
    // A stream may be continued on another engine from the ids: those are asked for, and stripped again.
    await streamChat(url, { ...body, stream: true }, {});
    const streamedTo = engines.find((e) => e.requests.some((r) => r.body.stream === true))!;
    expect(streamedTo.requests.find((r) => r.body.stream === true)!.body.return_token_ids).toBe(true);
  });

  it('answers completions, streaming and not, exactly as an engine does', async () => {
    await start();
    const body = { model: 'fake-model', prompt: 'Q: two plus two?\nA:' };
    const direct = (await (await post(engines[0].url, '/v1/completions', body, {})).json()) as { choices: Array<{ text: string }> };
    const viaRouter = (await (await post(url, '/v1/completions', body, identity('c1'))).json()) as { choices: Array<{ text: string }> };
    expect(viaRouter.choices[0].text).toBe(direct.choices[0].text);
    const streamed = await streamCompletion(url, { ...body, stream: true }, identity('c2'));
    expect(streamed.text).toBe(direct.choices[0].text);
    expect(recorder.trajectory(trajectoryIdOf('job-1', 'c2', 0)).turns).toMatchObject([
      { turnIndex: 0, kind: 'model-output', content: direct.choices[0].text },
    ]);
  });

  it("records a token-id prompt, falling back to /v1/completions on an engine without vLLM's generate endpoint", async () => {
    await start();
    // The fake engines answer 404 on /inference/v1/generate, as a vLLM started without --enable-scale-out answers 403.
    const body = { model: 'fake-model', prompt: [11, 12, 13], max_tokens: 8 };
    const res = await post(url, '/v1/completions', body, identity('t1'));
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { choices: Array<{ text: string }> };
    const turns = recorder.trajectory(trajectoryIdOf('job-1', 't1', 0)).turns;
    expect(turns).toMatchObject([{ turnIndex: 0, kind: 'model-output', content: answer.choices[0].text }]);
    expect(turns[0].spans?.[0]?.promptTokenIds).toEqual([11, 12, 13]);
    // A prompt that is neither text nor ids is refused, naming what a recorded request needs.
    const refused = await post(url, '/v1/completions', { model: 'fake-model', prompt: [[1], [2]] }, identity('t2'));
    expect(refused.status).toBe(400);
    expect(await refused.text()).toMatch(/a string or a list of token ids/);
  });

  it('keeps a trajectory on one engine across turns (sticky) and spreads new trajectories', async () => {
    await start({ toolRounds: 2 });
    const served: string[] = [];
    await agentLoop(url, prompt('sticky'), identity('s1'), { onResponse: (engineId) => served.push(engineId) });
    expect(served).toHaveLength(3);
    expect(new Set(served).size).toBe(1);
    const other = await chat(url, { messages: prompt('another') }, identity('s2'));
    expect(other.engineId).not.toBe(served[0]);
  });

  it('continues a stream cut by a dying engine on another one: same text, no gap or duplicate turn, a reassignment event', async () => {
    await start({ tokensPerReply: 40, tokenIntervalMs: 5 });
    const body = { model: 'fake-model', messages: prompt('long answer'), stream: true };
    const expected = await streamChat(engines[2].url, body, {});
    const result = await streamChat(url, body, identity('k1'), {
      afterChunks: 10,
      then: (engineId) => engineById(engineId).kill(),
    });
    expect(result.text).toBe(expected.text);
    expect(result.finishReason).toBe('stop');
    expect(result.done).toBe(true);
    expect(result.ids.size).toBe(1);
    expect(result.roleChunks).toBe(1);
    const killed = result.engineId!;
    const survivor = engines.find((e) => e.id !== killed && e.requests.length > 0)!;
    const continuation = survivor.requests[0].body;
    expect(continuation).toMatchObject({ continue_final_message: true, add_generation_prompt: false });
    const partial = (continuation.messages as ChatMessage[]).at(-1)!;
    expect(partial.role).toBe('assistant');
    expect(expected.text.startsWith(partial.content as string)).toBe(true);
    expect((partial.content as string).length).toBeGreaterThan(0);

    const tid = trajectoryIdOf('job-1', 'k1', 0);
    const turns = recorder.trajectory(tid).turns;
    expect(turns).toHaveLength(1);
    expect(turns[0]).toMatchObject({ turnIndex: 0, content: { role: 'assistant', content: expected.text }, rolloutId: survivor.id, tokens: 40 });
    expect(turns[0].weightVersion).toBe(Math.min(pool.get(killed)!.weightVersion, pool.get(survivor.id)!.weightVersion));
    expect(pool.get(killed)?.alive).toBe(false);
    await router.flushEvents();
    const [reassigned] = published('TrajectoriesReassigned');
    expect(reassigned.data).toMatchObject({ fromRolloutId: killed, assignments: [{ trajectoryId: tid, toRolloutId: survivor.id, resumeFromTurn: 0 }] });
    expect(published('TrajectoryStatusChanged').map((m) => m.data)).toEqual([expect.objectContaining({ trajectoryId: tid, status: 'reassigned', step: 4 })]);
  });

  it('a tool call cut mid-stream is never half-forwarded: the next engine generates it again after the forwarded text', async () => {
    await start({ toolRounds: 1, tokensPerReply: 12, tokenIntervalMs: 10 });
    const body = { model: 'fake-model', messages: prompt('use a tool'), stream: true };
    const expected = await streamChat(engines[0].url, body, {});
    expect(expected.message.tool_calls).toHaveLength(1);
    // Six content tokens, then the call's pieces: the kill lands while the call is being streamed.
    const result = await streamChat(url, body, identity('tc'), { afterChunks: 6, then: (id) => setTimeout(() => engineById(id).kill(), 25) });
    expect(result.message).toEqual(expected.message);
    expect(result.finishReason).toBe('tool_calls');
    const continued = engines.filter((e) => e.id !== result.engineId).flatMap((e) => e.requests.map((r) => (r.body.messages as ChatMessage[]).at(-1)));
    expect(continued).toContainEqual({ role: 'assistant', content: expected.text });
    expect(recorder.trajectory(trajectoryIdOf('job-1', 'tc', 0)).turns).toMatchObject([{ turnIndex: 0, kind: 'tool-call', content: expected.message }]);
  });

  it('continues a completions stream from the partial text appended to the prompt', async () => {
    await start({ tokensPerReply: 30 });
    const body = { model: 'fake-model', prompt: 'Once upon a time', stream: true, max_tokens: 25 };
    const expected = await streamCompletion(engines[0].url, body, {});
    const result = await streamCompletion(url, body, identity('kc'), { afterChunks: 8, then: (id) => engineById(id).kill() });
    expect(result.text).toBe(expected.text);
    expect(result.finishReason).toBe('length');
    const survivor = engines.find((e) => e.id !== result.engineId && e.requests.length > 0)!;
    expect(survivor.requests[0].body.max_tokens).toBe(25 - 8);
    expect((survivor.requests[0].body.prompt as string).startsWith('Once upon a time')).toBe(true);
  });

  it('resends a non-streaming request whose engine died, and a retried identical request records nothing twice', async () => {
    await start({ toolRounds: 1, tokenIntervalMs: 5 });
    const body = { model: 'fake-model', messages: prompt('retry me') };
    const sticky = pool.pick(trajectoryIdOf('job-1', 'r1', 0))!.id;
    engineById(sticky).kill();
    const first = await chat(url, body, identity('r1'));
    expect(first.message.tool_calls).toHaveLength(1);
    expect(first.engineId).not.toBe(sticky);
    const generated = engines.reduce((n, e) => n + e.requests.length, 0);
    const again = await chat(url, body, identity('r1'));
    expect(again.message).toEqual(first.message);
    expect(engines.reduce((n, e) => n + e.requests.length, 0)).toBe(generated);
    const tid = trajectoryIdOf('job-1', 'r1', 0);
    expect(recorder.trajectory(tid).turns).toHaveLength(1);

    // The next turn, sent twice concurrently (a client retry overlapping the original): one generation, one turn each.
    const call = first.message.tool_calls![0];
    const next = { model: 'fake-model', messages: [...body.messages, first.message, { role: 'tool', tool_call_id: call.id, content: toolResultFor(call) }] };
    const [a, b] = await Promise.all([chat(url, next, identity('r1')), chat(url, next, identity('r1'))]);
    expect(a.message).toEqual(b.message);
    expect(recorder.trajectory(tid).turns.map((t) => [t.turnIndex, t.kind])).toEqual([
      [0, 'tool-call'],
      [1, 'tool-result'],
      [2, 'model-output'],
    ]);
    expect(router.stats).toMatchObject({ replays: 2, recordingErrors: 0 });
  });

  it('refuses a request that rewrites the stored history, and half an identity', async () => {
    await start();
    const first = await chat(url, { messages: prompt('h') }, identity('h1'));
    const edited = { messages: [...prompt('h'), { ...first.message, content: 'something else' }, { role: 'user', content: 'go on' }] };
    const conflict = await post(url, '/v1/chat/completions', edited, identity('h1'));
    expect(conflict.status).toBe(409);
    expect(((await conflict.json()) as { error: { type: string } }).error.type).toBe('ConflictError');
    const partial = await post(url, '/v1/chat/completions', { messages: prompt('h') }, { 'x-robustrl-job': 'job-1' });
    expect(partial.status).toBe(400);
    expect(((await partial.json()) as { error: { message: string } }).error.message).toMatch(/x-robustrl-prompt, x-robustrl-sample/);
    // Identity values the store could not hold are the caller's mistake: 400 naming the header, nothing stored.
    for (const [bad, named] of [
      [{ 'x-robustrl-prompt': 'p'.repeat(501) }, /x-robustrl-prompt is longer than 500/],
      [{ 'x-robustrl-sample': String(2 ** 31) }, /x-robustrl-sample must be an integer from 0 to 2147483647/],
      [{ 'x-robustrl-step': '99999999999999999999' }, /x-robustrl-step must be an integer/],
      [{ 'x-robustrl-prompt': '\u00e9'.repeat(100) }, /the trajectory id .* is longer than 500/],
    ] as const) {
      const refused = await post(url, '/v1/chat/completions', { messages: prompt('h') }, { ...identity('h2'), ...bad });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(named);
    }
    const anonymous = await chat(url, { messages: prompt('h') }, {});
    expect(anonymous.message).toEqual(first.message);
    expect(recorder.trajectoryIds()).toEqual([trajectoryIdOf('job-1', 'h1', 0)]);
  });

  it('answers 503 with an OpenAI error after the deadline when no engine is alive; GET /v1/models and /health follow liveness', async () => {
    await start({ noEngineDeadlineMs: 400 });
    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: Array<{ id: string }> };
    expect(models.data[0].id).toBe('fake-model');
    for (const e of engines) e.kill();
    const began = Date.now();
    const res = await post(url, '/v1/chat/completions', { messages: prompt('anyone?') }, identity('d1'));
    expect(res.status).toBe(503);
    expect(Date.now() - began).toBeGreaterThanOrEqual(350);
    expect(await res.json()).toEqual({
      error: { message: expect.stringMatching(/no living rollout engine/), type: 'ServiceUnavailableError', param: null, code: 503 },
    });
    expect((await fetch(`${url}/health`)).status).toBe(503);
  });

  it('waits for an engine to come back within the deadline instead of failing', async () => {
    await start({ noEngineDeadlineMs: 5_000 });
    for (const e of engines) e.kill();
    for (const e of engines) pool.markDead(e.id, 'killed');
    setTimeout(() => void engines[1].restart(), 300);
    const answer = await chat(url, { messages: prompt('patience') }, identity('w1'));
    expect(answer.engineId).toBe('e2');
    expect(answer.message.content).toBe(chatReplyFor(prompt('patience')).tokens.join(''));
  });

  it("fails over on a 5xx, and relays the engines' error when all of them answer so", async () => {
    engines = await Promise.all(['e1', 'e2'].map((id, i) => FakeInferenceEngine.start({ id, failStatus: i === 0 ? 500 : undefined })));
    pool = new EnginePool(
      engines.map((e) => ({ id: e.id, baseUrl: e.url })),
      { probeIntervalMs: 0 },
    );
    bus = new InProcessBus();
    recorder = new InMemoryTrajectoryRecorder();
    router = new OpenAiRouter({ pool, recorder, bus, logger: quiet, noEngineDeadlineMs: 500 });
    url = await router.listen();
    const ok = await chat(url, { messages: prompt('five hundred') }, identity('f1'));
    expect(ok.engineId).toBe('e2');
    expect(pool.get('e1')?.alive).toBe(true);
    engines[1].kill();
    const res = await post(url, '/v1/chat/completions', { messages: prompt('five hundred') }, {});
    expect(res.status).toBe(500);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/e1 is failing/);
  });

  it("checks a trajectory's engine after each tool iteration: one that hung during the tool call is skipped at once", async () => {
    await start({ toolRounds: 1, tokensPerReply: 8, tokenIntervalMs: 1 });
    const messages = prompt('hang after the tool call');
    const first = await chat(url, { model: 'fake-model', messages }, identity('hang'));
    expect(first.message.tool_calls).toHaveLength(1);
    const hung = engineById(first.engineId);
    hung.freeze(); // accepts connections, never answers: a request to it would wait for the idle timeout (300 s)
    const call = first.message.tool_calls![0];
    const started = Date.now();
    const second = await chat(
      url,
      { model: 'fake-model', messages: [...messages, first.message, { role: 'tool', tool_call_id: call.id, content: toolResultFor(call) }] },
      identity('hang'),
    );
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(second.engineId).not.toBe(hung.id);
    expect(second.message.tool_calls).toBeUndefined();
    expect(pool.get(hung.id)?.alive).toBe(false);
  });

  it('runs 8 concurrent multi-turn trajectories with tool calls through an engine death: all complete, no turn lost or duplicated', async () => {
    await start({ toolRounds: 3, tokensPerReply: 16, tokenIntervalMs: 4 });
    const samples = Array.from({ length: 8 }, (_, i) => i);
    // Killed while it streams (not at a fixed time: on a loaded machine that could fall between requests).
    const killWhenStreaming = setInterval(() => {
      if (engines[0].openGenerations > 0) {
        engines[0].kill();
        clearInterval(killWhenStreaming);
      }
    }, 2);
    const conversations = await Promise.all(samples.map((i) => agentLoop(url, prompt(`task ${i % 4}`), identity(`task-${i % 4}`, i), { stream: i % 2 === 0 })));
    expect(engines[0].requests.length).toBeGreaterThan(0);
    for (const [i, conversation] of conversations.entries()) {
      expect(conversation).toEqual(await expectedConversation(prompt(`task ${i % 4}`), 3));
      const { turns } = recorder.trajectory(trajectoryIdOf('job-1', `task-${i % 4}`, i));
      expect(turns.map((t) => t.turnIndex)).toEqual([0, 1, 2, 3, 4, 5, 6]);
      expect(turns.map((t) => t.kind)).toEqual(['tool-call', 'tool-result', 'tool-call', 'tool-result', 'tool-call', 'tool-result', 'model-output']);
      expect(new Set(turns.map((t) => t.turnId)).size).toBe(7);
      expect(turns.map((t) => turnKey(t.content))).toEqual(conversation.slice(2).map((m) => turnKey(m)));
      expect(turns.filter((t) => t.kind !== 'tool-result').every((t) => t.rolloutId !== null)).toBe(true);
    }
    clearInterval(killWhenStreaming);
    expect(router.stats.recordingErrors).toBe(0);
    expect(router.stats.failovers).toBeGreaterThan(0);
    await router.flushEvents();
    expect(published('TrajectoriesReassigned').every((m) => (m.data as { fromRolloutId: string }).fromRolloutId === 'e1')).toBe(true);
  });

  /**
   * On main the continuation policy was reachable only through the request manager's
   * HTTP status change; a trajectory that moved to an engine with newer weights simply went on.
   */
  describe('a trajectory that goes on with newer weights than its turns (the continuation policy)', () => {
    /** Its first turn (a tool call) on weights 7; then its engine leaves and the others serve `version`. */
    const firstTurnThenMove = async (promptId: string, version: number): Promise<{ conversation: ChatMessage[]; first: ChatMessage }> => {
      for (const e of pool.snapshot()) pool.setWeightVersion(e.id, 7);
      const messages = prompt(promptId);
      const first = await chat(url, { model: 'fake-model', messages }, identity(promptId));
      const call = first.message.tool_calls![0];
      pool.remove(first.engineId!);
      for (const e of pool.snapshot()) pool.setWeightVersion(e.id, version);
      return { conversation: [...messages, first.message, { role: 'tool', tool_call_id: call.id, content: toolResultFor(call) }], first: first.message };
    };
    const trajectoryOf = (promptId: string) => trajectoryIdOf('job-1', promptId, 0);

    it('keep, within the bound: the turns are kept and the store is not asked', async () => {
      await start({ toolRounds: 1, continuation: { policy: 'keep', maxStaleness: 1 } });
      const { conversation } = await firstTurnThenMove('kept', 8);
      const next = await chat(url, { model: 'fake-model', messages: conversation }, identity('kept'));
      expect(next.message.tool_calls).toBeUndefined();
      expect(recorder.continuationLog).toEqual([]);
      const { turns } = recorder.trajectory(trajectoryOf('kept'));
      expect(turns.map((t) => [t.kind, t.weightVersion])).toEqual([
        ['tool-call', 7],
        ['tool-result', 8],
        ['model-output', 8],
      ]);
    });

    it('keep, beyond the bound: the store restarts it from the prompt, the caller is told, and the restarted attempt is recorded afresh', async () => {
      await start({ toolRounds: 1, continuation: { policy: 'keep', maxStaleness: 1 } });
      const { conversation, first } = await firstTurnThenMove('beyond', 9);
      const refused = await post(url, '/v1/chat/completions', { model: 'fake-model', messages: conversation }, identity('beyond'));
      expect(refused.status).toBe(409);
      expect(refused.headers.get('x-robustrl-restarted')).toBe('prefix-beyond-bound');
      const error = ((await refused.json()) as { error: { type: string; message: string } }).error;
      expect(error.type).toBe('TrajectoryRestartedError');
      expect(error.message).toMatch(/sampled with weight version 7 and it continues on version 9 .*beyond the staleness bound of 1.*send the prompt alone/);
      expect(recorder.continuationLog).toEqual([
        expect.objectContaining({
          trajectoryId: trajectoryOf('beyond'),
          continuation: { weightVersion: 9, policy: 'keep', maxStaleness: 1 },
          decision: { action: 'restart-from-prompt', reason: 'prefix-beyond-bound' },
        }),
      ]);
      // The dropped attempt's turns are gone, the tool result that came with the refused request was never stored.
      expect(recorder.trajectory(trajectoryOf('beyond')).turns).toEqual([]);
      expect((await recorder.prefix(trajectoryOf('beyond'))).attempt).toBe(1);

      // A caller still on the dropped attempt is refused: its model turns would come back under the new weights.
      const stale = await post(url, '/v1/chat/completions', { model: 'fake-model', messages: conversation }, identity('beyond'));
      expect(stale.status).toBe(409);
      expect(await stale.text()).toMatch(/restarted from its prompt \(now attempt 1\)/);

      // From the prompt alone it starts again on the new weights: the same answer (the fake engine is deterministic) is a new turn of attempt 1.
      const again = await chat(url, { model: 'fake-model', messages: prompt('beyond') }, identity('beyond'));
      expect(again.message).toEqual(first);
      const { turns } = recorder.trajectory(trajectoryOf('beyond'));
      expect(turns.map((t) => [t.turnIndex, t.kind, t.weightVersion, t.attempt])).toEqual([[0, 'tool-call', 9, 1]]);
      expect(turns[0].turnId).toContain('#a1#0#');
      expect(recorder.continuationLog).toHaveLength(1);
    });

    it('restart-from-prompt: any newer weights restart it (policy-restart); the same weights go on without asking', async () => {
      await start({ toolRounds: 1, continuation: { policy: 'restart-from-prompt' } });
      const same = await firstTurnThenMove('same', 7);
      expect((await chat(url, { model: 'fake-model', messages: same.conversation }, identity('same'))).message.tool_calls).toBeUndefined();
      expect(recorder.continuationLog).toEqual([]);

      const newer = await firstTurnThenMove('newer', 8);
      const refused = await post(url, '/v1/chat/completions', { model: 'fake-model', messages: newer.conversation, stream: true }, identity('newer'));
      expect(refused.status).toBe(409);
      expect(refused.headers.get('x-robustrl-restarted')).toBe('policy-restart');
      expect(await refused.text()).toMatch(/the job's continuation policy is restart-from-prompt/);
      expect(recorder.continuationLog.map((c) => c.decision)).toEqual([{ action: 'restart-from-prompt', reason: 'policy-restart' }]);
      expect(recorder.trajectory(trajectoryOf('same')).turns).toHaveLength(3);
    });

    it('a store that cannot be asked does not stop the trajectory: it goes on and the failure is counted', async () => {
      class UnreachableForContinuations extends InMemoryTrajectoryRecorder {
        override async continueWith(_trajectoryId: string, _request: ContinuationRequest): Promise<never> {
          throw new Error('request manager answered 503');
        }
      }
      await start({ toolRounds: 1, continuation: { policy: 'restart-from-prompt' }, recorder: new UnreachableForContinuations() });
      const { conversation } = await firstTurnThenMove('down', 8);
      const next = await chat(url, { model: 'fake-model', messages: conversation }, identity('down'));
      expect(next.message.tool_calls).toBeUndefined();
      expect(router.stats.recordingErrors).toBe(1);
      expect(recorder.trajectory(trajectoryOf('down')).turns.map((t) => t.kind)).toEqual(['tool-call', 'tool-result', 'model-output']);
    });
  });
});

/**
 * What the whole-system chaos campaign found: the caller had the answer before the store had
 * its turn, completed the trajectory, and the final turn was refused as closed; and the turn was tagged
 * with the version the pool believed the engine held, while the engine had already swapped weights.
 */
describe('OpenAiRouter: a recorded answer is stored before the caller has it, tagged with the version that produced it', () => {
  let engine: Server;
  let router: OpenAiRouter;
  let pool: EnginePool;
  let bus: InProcessBus;
  const quiet: RouterLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };
  const headers = { 'x-robustrl-job': 'job-9', 'x-robustrl-prompt': 'p', 'x-robustrl-sample': '0', 'x-robustrl-step': '3' };
  const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

  /** An engine that swapped to version 9 on its own, and says so in its answers. */
  const startWith = async (recorder: InMemoryTrajectoryRecorder) => {
    engine = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const answer = {
          id: 'x',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: 'v9: done' }, finish_reason: 'stop' }],
        };
        res.writeHead(200, { 'content-type': 'application/json', 'x-robustrl-weight-version': '9' }).end(JSON.stringify(answer));
      });
    });
    await new Promise<void>((r) => engine.listen(0, '127.0.0.1', r));
    pool = new EnginePool([{ id: 'e', baseUrl: `http://127.0.0.1:${(engine.address() as AddressInfo).port}`, weightVersion: 8 }], {
      probeIntervalMs: 0,
      probeTimeoutMs: 300,
    });
    bus = new InProcessBus();
    router = new OpenAiRouter({ pool, recorder, bus, noEngineDeadlineMs: 1_000, logger: quiet });
    return router.listen(0, '127.0.0.1');
  };

  afterEach(async () => {
    await router.close();
    await new Promise((r) => engine.close(r));
    await pool.stop();
    await bus.close();
  });

  it('a slow store: the answer arrives only once its turn is stored, tagged 9 (the engine said so), not 8 (the pool)', async () => {
    class SlowStore extends InMemoryTrajectoryRecorder {
      override async appendTurns(turns: RecordedTurn[]): Promise<void> {
        await new Promise((r) => setTimeout(r, 300));
        return super.appendTurns(turns);
      }
    }
    const recorder = new SlowStore();
    const url = await startWith(recorder);
    const answer = await chat(url, body, headers);
    expect(answer.message.content).toBe('v9: done');
    // At the moment the caller has the answer (and could complete the trajectory), its turn is stored.
    expect(recorder.trajectory(trajectoryIdOf('job-9', 'p', 0)).turns).toMatchObject([{ kind: 'model-output', weightVersion: 9 }]);
  });

  it('a store that cannot be read: the caller gets a 503 to ask again, nothing is generated unrecorded (the trajectory would be lost)', async () => {
    let generated = 0;
    class UnreadableStore extends InMemoryTrajectoryRecorder {
      override async prefix(): Promise<never> {
        throw new Error('connect ECONNREFUSED');
      }
    }
    const url = await startWith(new UnreadableStore());
    engine.on('request', () => (generated += 1));
    const refused = await post(url, '/v1/chat/completions', body, headers);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('2');
    expect(await refused.text()).toMatch(/could not be read.*ask again/);
    expect(generated).toBe(0);
  });

  it("a store that refuses what the caller sent (400): the caller gets a 400 with the store's reason, not a 503 to retry", async () => {
    let generated = 0;
    class StrictStore extends InMemoryTrajectoryRecorder {
      override async start(): Promise<never> {
        throw new RecordRefusedError('request manager refused POST /v1/trajectories (400): trajectories.0.prompt: at most 64 KiB');
      }
    }
    const url = await startWith(new StrictStore());
    engine.on('request', () => (generated += 1));
    const refused = await post(url, '/v1/chat/completions', body, headers);
    expect(refused.status).toBe(400);
    expect(refused.headers.get('retry-after')).toBeNull();
    expect(((await refused.json()) as { error: { type: string; message: string } }).error).toMatchObject({
      type: 'BadRequestError',
      message: expect.stringMatching(/refused POST \/v1\/trajectories \(400\)/),
    });
    expect(generated).toBe(0);
  });

  it('a store that refuses the turn: the caller gets a 503 to ask again, not an answer nobody stored', async () => {
    class RefusingStore extends InMemoryTrajectoryRecorder {
      override async appendTurns(): Promise<void> {
        throw new Error('request manager answered 503');
      }
    }
    const url = await startWith(new RefusingStore());
    const refused = await post(url, '/v1/chat/completions', body, headers);
    expect(refused.status).toBe(503);
    expect(await refused.text()).toMatch(/could not be stored, ask again/);
    expect(router.stats.recordingErrors).toBe(1);
  });
});

describe('OpenAiRouter: an engine answer past the size limit', () => {
  const servers: Server[] = [];
  let router: OpenAiRouter;
  let pool: EnginePool;
  let bus: InProcessBus;
  const quiet: RouterLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

  /** An engine answering chat with `content` (its size is the point). */
  const engineAnswering = async (content: string) => {
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () =>
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }] })),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    servers.push(server);
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };

  afterEach(async () => {
    await router.close();
    await pool.stop();
    await bus.close();
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });

  it('is not read whole: the request is answered by another engine, the big one skipped for it, not declared dead', async () => {
    const warned: Array<Record<string, unknown>> = [];
    const log: RouterLogger = { ...quiet, warn: (_m, fields) => void warned.push(fields ?? {}) };
    pool = new EnginePool(
      [
        { id: 'e-big', baseUrl: await engineAnswering('x'.repeat(50_000)), weightVersion: 1 },
        { id: 'e-small', baseUrl: await engineAnswering('fine'), weightVersion: 1 },
      ],
      { probeIntervalMs: 0, probeTimeoutMs: 300 },
    );
    bus = new InProcessBus();
    router = new OpenAiRouter({
      pool,
      recorder: new InMemoryTrajectoryRecorder(),
      bus,
      noEngineDeadlineMs: 1_000,
      logger: log,
      maxEngineAnswerBytes: 10_000,
    });
    const url = await router.listen(0, '127.0.0.1');
    const headers = { 'x-robustrl-job': 'job-s', 'x-robustrl-prompt': 'p', 'x-robustrl-sample': '0' };
    pool.assign(trajectoryIdOf('job-s', 'p', 0), 'e-big');
    const answer = await chat(url, { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, headers);
    expect(answer.message.content).toBe('fine');
    expect(router.stats.failovers).toBe(1);
    expect(warned).toContainEqual(expect.objectContaining({ engine: 'e-big', reason: "the engine's answer: the body exceeds 10000 bytes" }));
  });
});
