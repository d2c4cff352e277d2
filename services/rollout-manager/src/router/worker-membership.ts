import { IncomingMessage, ServerResponse } from 'node:http';
import type { TokenScope } from '@robustrl/service-kit';
import { EnginePool, EngineView } from './engine-pool';
import { EngineKind, isEngineKind } from './engines';
import { readAll } from './http-transport';

/**
 * The router's membership API in the shape of SGLang's Model Gateway (sgl-router), so the tools and
 * scripts users already drive a gateway with drive this router too (shapes in
 * docs/engine-api-shapes.md §3):
 *
 *   POST   /workers            {"url", "runtime"?, "model_id"?, "labels"?{"machine_id"}}  → 202 {"status":"accepted","worker_id","message"}
 *   GET    /workers                                        → {"workers":[WorkerInfo],"total","stats":{…}}
 *   GET    /workers/{url}      (the URL percent-encoded)   → WorkerInfo | 404 {"error","code":"WORKER_NOT_FOUND"}
 *   DELETE /workers/{url}                                  → 202 {"status":"accepted","worker_id","message"} | 404
 *   POST   /add_worker?url=…   (legacy)                    → 200 text | 400 text
 *   POST   /remove_worker?url=… (legacy)                   → 200 text | 400 text
 *   GET    /list_workers       (legacy)                    → {"urls":[…]}
 *   GET    /readiness                                      → 200 {"status":"ready","healthy_workers","total_workers"} | 503
 *
 * The gateway queues additions and answers 202; here they apply at once (a GET right after sees the
 * worker), and the answer keeps the gateway's 202 so a client written for it reads it unchanged. A
 * worker's id is its URL, as in the gateway; `runtime` picks the engine adapter (sglang, vllm,
 * llama.cpp; else the router's default); `labels.machine_id` names its GPU machine for the detector
 * (default: the URL's host).
 */
export interface WorkerInfo {
  id: string;
  url: string;
  model_id: string;
  priority: number;
  cost: number;
  worker_type: 'regular';
  is_healthy: boolean;
  load: number;
  connection_mode: 'http';
  runtime_type: EngineKind;
  metadata: { machine_id: string; weight_version: string };
}

/**
 * The token scope a membership request needs, null when the request is not one: changing who serves
 * is an operator's act (`admin`); the generation key an agent loop holds may list engines, never add
 * or remove one (an engine added is live at once, outside the staleness bound, and names the machine
 * the detector blames).
 */
export function membershipScope(method: string, path: string): TokenScope | null {
  if (method === 'POST' && (path === '/workers' || path === '/add_worker' || path === '/remove_worker')) return 'admin';
  if (method === 'DELETE' && path.startsWith('/workers/')) return 'admin';
  if (method === 'GET' && (path === '/workers' || path.startsWith('/workers/') || path === '/list_workers')) return 'read';
  return null;
}

export async function handleMembership(req: IncomingMessage, res: ServerResponse, path: string, pool: EnginePool, defaultKind: EngineKind): Promise<boolean> {
  const method = req.method ?? 'GET';
  const query = new URL(req.url ?? '/', 'http://router').searchParams;
  if (path === '/workers' && method === 'GET') {
    const workers = pool.snapshot().map(workerInfo);
    return json(res, 200, { workers, total: workers.length, stats: { prefill_count: 0, decode_count: 0, regular_count: workers.length } });
  }
  if (path === '/workers' && method === 'POST') {
    let body: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse((await readAll(req, 1024 * 1024)).toString('utf8'));
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('the body is not a JSON object');
      body = parsed as Record<string, unknown>;
    } catch (err) {
      return json(res, 400, { error: `invalid worker spec: ${err instanceof Error ? err.message : String(err)}`, code: 'ADD_WORKER_FAILED' });
    }
    const added = addWorker(pool, body, defaultKind);
    if ('error' in added) return json(res, 400, { error: added.error, code: 'ADD_WORKER_FAILED' });
    return json(res, 202, { status: 'accepted', worker_id: added.url, message: 'Worker added to the router' });
  }
  if (path.startsWith('/workers/') && (method === 'GET' || method === 'DELETE')) {
    const url = decodeWorkerUrl(path.slice('/workers/'.length));
    const engine = url === null ? undefined : pool.get(url);
    if (!engine) return json(res, 404, { error: `Worker ${url ?? path.slice(9)} not found`, code: 'WORKER_NOT_FOUND' });
    if (method === 'GET') return json(res, 200, workerInfo(engine));
    pool.remove(engine.id);
    return json(res, 202, { status: 'accepted', worker_id: engine.id, message: 'Worker removed from the router' });
  }
  if (path === '/add_worker' && method === 'POST') {
    const url = query.get('url');
    if (!url) return text(res, 400, "Worker URL required. Provide 'url' query parameter");
    const added = addWorker(pool, { url }, defaultKind);
    if ('error' in added) return text(res, 400, added.error);
    return text(res, 200, `Successfully added worker: ${added.url}`);
  }
  if (path === '/remove_worker' && method === 'POST') {
    const url = query.get('url');
    if (!url) return text(res, 400, "Worker URL required. Provide 'url' query parameter");
    const id = normalizeUrl(url);
    if (!id || !pool.get(id)) return text(res, 400, `Worker ${url} not found`);
    pool.remove(id);
    return text(res, 200, `Successfully removed worker: ${id}`);
  }
  if (path === '/list_workers' && method === 'GET') return json(res, 200, { urls: pool.snapshot().map((e) => e.baseUrl) });
  if (path === '/readiness' && method === 'GET') {
    const engines = pool.snapshot();
    const healthy = engines.filter((e) => e.alive).length;
    if (healthy > 0) return json(res, 200, { status: 'ready', healthy_workers: healthy, total_workers: engines.length });
    return json(res, 503, { status: 'not ready', reason: 'insufficient healthy workers' });
  }
  if (path === '/liveness' && method === 'GET') return text(res, 200, 'OK');
  return false;
}

function addWorker(pool: EnginePool, body: Record<string, unknown>, defaultKind: EngineKind): { url: string } | { error: string } {
  const url = typeof body.url === 'string' ? normalizeUrl(body.url) : null;
  if (!url) return { error: '`url` must be an http(s) URL' };
  const runtime = body.runtime ?? body.runtime_type;
  const kind = runtime === undefined || runtime === null ? defaultKind : runtime === 'llamacpp' ? 'llama.cpp' : runtime;
  if (!isEngineKind(kind)) return { error: `unknown runtime '${String(runtime)}' (sglang, vllm, llama.cpp)` };
  const labels = (typeof body.labels === 'object' && body.labels !== null ? body.labels : {}) as Record<string, unknown>;
  const machineId = typeof labels.machine_id === 'string' && labels.machine_id !== '' ? labels.machine_id : new URL(url).hostname;
  pool.add({ id: url, machineId, baseUrl: url, kind });
  return { url };
}

/** The worker's id: its URL without a trailing slash (what the gateway keys workers by). */
function normalizeUrl(raw: string): string | null {
  try {
    const u = new URL(raw.trim());
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
    return raw.trim().replace(/\/+$/, '');
  } catch {
    return null;
  }
}

function decodeWorkerUrl(segment: string): string | null {
  try {
    return normalizeUrl(decodeURIComponent(segment));
  } catch {
    return null;
  }
}

function workerInfo(e: EngineView): WorkerInfo {
  return {
    id: e.id,
    url: e.baseUrl,
    model_id: 'unknown',
    priority: 50,
    cost: 1,
    worker_type: 'regular',
    is_healthy: e.alive,
    load: e.inFlight,
    connection_mode: 'http',
    runtime_type: e.kind,
    metadata: { machine_id: e.machineId, weight_version: String(e.weightVersion) },
  };
}

function json(res: ServerResponse, status: number, body: unknown): true {
  const raw = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(raw) }).end(raw);
  return true;
}

function text(res: ServerResponse, status: number, body: string): true {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body);
  return true;
}
