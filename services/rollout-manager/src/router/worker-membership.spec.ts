import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { httpAuthFromEnv } from '@robustrl/service-kit';
import { FakeInferenceEngine } from '@robustrl/testing/fake-inference-engine';
import { EnginePool } from './engine-pool';
import { GatewayMirror } from './gateway-mirror';
import { ModelGatewayClient } from './model-gateway-client';
import { OpenAiRouter } from './openai-router';

/**
 * The router's membership API speaks SGLang Model Gateway's (docs/engine-api-shapes.md §3), and the
 * client that drives a gateway works against both its generations: the REST API (this router, which
 * answers as a newer gateway does) and the legacy one (a stand-in that has only /add_worker,
 * /remove_worker and /list_workers, answering in plain text as the old sgl-router did).
 */
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** An old sgl-router's membership endpoints (actix server.rs): text answers, no /workers route. */
async function legacyGateway(): Promise<{ url: string; urls: Set<string>; close(): Promise<void> }> {
  const urls = new Set<string>();
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    const worker = u.searchParams.get('url');
    if (req.method === 'POST' && u.pathname === '/add_worker' && worker) {
      urls.add(worker);
      return void res.writeHead(200, { 'content-type': 'text/plain' }).end(`Successfully added worker: ${worker}`);
    }
    if (req.method === 'POST' && u.pathname === '/remove_worker' && worker) {
      urls.delete(worker);
      return void res.writeHead(200, { 'content-type': 'text/plain' }).end(`Successfully removed worker: ${worker}`);
    }
    if (req.method === 'GET' && u.pathname === '/list_workers')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ urls: [...urls] }));
    res.writeHead(404, { 'content-type': 'text/plain' }).end('Not Found');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, urls, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('membership API (SGLang Model Gateway style)', () => {
  let engine: FakeInferenceEngine;
  let pool: EnginePool;
  let router: OpenAiRouter;

  beforeEach(async () => {
    engine = await FakeInferenceEngine.start({ id: 'e1', tokensPerReply: 4 });
    pool = new EnginePool([], { probeIntervalMs: 0 });
    router = new OpenAiRouter({ pool, logger: quiet, defaultEngineKind: 'llama.cpp', noEngineDeadlineMs: 200 });
    await router.listen();
  });
  afterEach(async () => {
    await router.close();
    await pool.stop();
    engine.kill();
  });

  it('POST /workers adds a worker that serves requests at once; GET lists it as a WorkerInfo; DELETE removes it', async () => {
    const added = await fetch(`${router.url}/workers`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: engine.url, runtime: 'vllm', labels: { machine_id: 'gpu-7' } }),
    });
    expect(added.status).toBe(202);
    expect(await added.json()).toEqual({ status: 'accepted', worker_id: engine.url, message: expect.any(String) });
    const chat = await fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(chat.status).toBe(200);
    const listed = (await (await fetch(`${router.url}/workers`)).json()) as {
      workers: Array<Record<string, unknown>>;
      total: number;
      stats: Record<string, number>;
    };
    expect(listed).toMatchObject({ total: 1, stats: { regular_count: 1, prefill_count: 0, decode_count: 0 } });
    expect(listed.workers[0]).toMatchObject({
      id: engine.url,
      url: engine.url,
      worker_type: 'regular',
      is_healthy: true,
      runtime_type: 'vllm',
      metadata: { machine_id: 'gpu-7' },
    });
    const one = await fetch(`${router.url}/workers/${encodeURIComponent(engine.url)}`);
    expect(one.status).toBe(200);
    const removed = await fetch(`${router.url}/workers/${encodeURIComponent(engine.url)}`, { method: 'DELETE' });
    expect(removed.status).toBe(202);
    expect(pool.snapshot()).toEqual([]);
    const gone = await fetch(`${router.url}/workers/${encodeURIComponent(engine.url)}`);
    expect(gone.status).toBe(404);
    expect(await gone.json()).toEqual({ error: expect.stringContaining('not found'), code: 'WORKER_NOT_FOUND' });
  });

  it('refuses a worker without an http(s) URL or with an unknown runtime, saying why', async () => {
    for (const body of [{}, { url: 'ftp://x' }, { url: engine.url, runtime: 'tgi' }]) {
      const res = await fetch(`${router.url}/workers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: expect.any(String), code: 'ADD_WORKER_FAILED' });
    }
    const missing = await fetch(`${router.url}/add_worker`, { method: 'POST' });
    expect(missing.status).toBe(400);
    expect(await missing.text()).toContain("Provide 'url' query parameter");
  });

  it('the legacy endpoints: /add_worker?url= and /remove_worker?url= answer text, /list_workers the URLs; a worker without runtime gets the default adapter', async () => {
    const add = await fetch(`${router.url}/add_worker?url=${encodeURIComponent(engine.url)}`, { method: 'POST' });
    expect(add.status).toBe(200);
    expect(await add.text()).toBe(`Successfully added worker: ${engine.url}`);
    expect(pool.get(engine.url)?.kind).toBe('llama.cpp');
    expect(await (await fetch(`${router.url}/list_workers`)).json()).toEqual({ urls: [engine.url] });
    const ready = await fetch(`${router.url}/readiness`);
    expect(await ready.json()).toEqual({ status: 'ready', healthy_workers: 1, total_workers: 1 });
    const remove = await fetch(`${router.url}/remove_worker?url=${encodeURIComponent(engine.url)}`, { method: 'POST' });
    expect(await remove.text()).toBe(`Successfully removed worker: ${engine.url}`);
    expect((await fetch(`${router.url}/readiness`)).status).toBe(503);
  });

  it('asks for the bearer token like every other route, except the probes', async () => {
    const guarded = new OpenAiRouter({
      pool,
      logger: quiet,
      auth: httpAuthFromEnv({ ROBUSTRL_ROUTER_TOKENS: 's3cret-token-of-the-loops' }, '0.0.0.0', 'ROBUSTRL_ROUTER'),
    });
    await guarded.listen();
    try {
      expect((await fetch(`${guarded.url}/workers`)).status).toBe(401);
      expect((await fetch(`${guarded.url}/workers`, { headers: { authorization: 'Bearer s3cret-token-of-the-loops' } })).status).toBe(200);
      expect((await fetch(`${guarded.url}/liveness`)).status).toBe(200);
    } finally {
      await guarded.close();
    }
  });
});

describe('ModelGatewayClient and GatewayMirror: driving an existing gateway', () => {
  it.each(['rest', 'legacy'] as const)('%s API: add, list, remove — idempotent both ways', async (kind) => {
    const pool = new EnginePool([], { probeIntervalMs: 0 });
    const router = new OpenAiRouter({ pool, logger: quiet });
    const legacy = kind === 'legacy' ? await legacyGateway() : null;
    const base = legacy ? legacy.url : await router.listen();
    try {
      const client = new ModelGatewayClient(base);
      await client.addWorker({ url: 'http://10.0.0.5:30000', runtime: 'sglang', machineId: 'gpu-5' });
      await client.addWorker({ url: 'http://10.0.0.5:30000', runtime: 'sglang', machineId: 'gpu-5' });
      expect(await client.listWorkers()).toEqual(['http://10.0.0.5:30000']);
      if (!legacy) expect(pool.get('http://10.0.0.5:30000')).toMatchObject({ kind: 'sglang', machineId: 'gpu-5' });
      await client.removeWorker('http://10.0.0.5:30000');
      await client.removeWorker('http://10.0.0.5:30000');
      expect(await client.listWorkers()).toEqual([]);
    } finally {
      await router.close();
      await legacy?.close();
    }
  });

  it('the mirror adds the engines that join, removes those that leave, and leaves the gateway’s own workers alone', async () => {
    const gateway = await legacyGateway();
    gateway.urls.add('http://theirs:1');
    const local = new EnginePool([], { probeIntervalMs: 0 });
    const mirror = new GatewayMirror(new ModelGatewayClient(gateway.url), quiet);
    try {
      local.add({ id: 'e1', baseUrl: 'http://e1:8000', kind: 'vllm' });
      local.add({ id: 'e2', baseUrl: 'http://e2:8000', kind: 'vllm' });
      await mirror.sync(local.snapshot());
      expect([...gateway.urls].sort()).toEqual(['http://e1:8000', 'http://e2:8000', 'http://theirs:1']);
      local.remove('e1');
      await mirror.sync(local.snapshot());
      expect([...gateway.urls].sort()).toEqual(['http://e2:8000', 'http://theirs:1']);
    } finally {
      await gateway.close();
    }
  });

  it('a gateway that is down is caught up with on the next sync', async () => {
    const gateway = await legacyGateway();
    const url = gateway.url;
    await gateway.close();
    const local = new EnginePool([{ id: 'e1', baseUrl: 'http://e1:8000' }], { probeIntervalMs: 0 });
    const warnings: string[] = [];
    const mirror = new GatewayMirror(new ModelGatewayClient(url, { timeoutMs: 500 }), { ...quiet, warn: (m) => warnings.push(m) });
    await mirror.sync(local.snapshot());
    expect(warnings).toEqual(['the external gateway did not take a worker; retried on the next sync']);
    const back = await legacyGateway();
    try {
      const mirror2 = new GatewayMirror(new ModelGatewayClient(back.url), quiet);
      await mirror2.sync(local.snapshot());
      expect([...back.urls]).toEqual(['http://e1:8000']);
    } finally {
      await back.close();
    }
  });
});
