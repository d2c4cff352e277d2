/**
 * A fake vLLM engine for bench:router, one process each: an OpenAI-compatible server that answers at
 * once with 16 tokens, streamed (one SSE chunk a token) or not, in vLLM's shapes (vllm-answers.ts). It
 * costs next to nothing, so what a router adds is what the benchmark sees. It also measures prefix-cache
 * affinity (affinity-memory.ts): `GET /stats` → {requests, multiTurnRequests, hits}, `POST /stats/reset`,
 * `POST /stats/forget` (a cold engine for the next configuration).
 *
 *   node bench/dist/router/fake-engine.js [--port P]   (0, the default: any free port)
 *
 * Prints `{"port":P}` on stdout once it listens.
 */
import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import { AffinityMemory } from './affinity-memory';
import { answerText, askedOf, modelList, streamEvents, wholeAnswer } from './vllm-answers';

const memory = new AffinityMemory();
const unknownPaths = new Set<string>();
let nextId = 0;

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (b: Buffer) => parts.push(b));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

async function generation(api: 'chat' | 'completions', req: IncomingMessage, res: ServerResponse): Promise<void> {
  let body: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(await readBody(req));
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not a JSON object');
    body = parsed as Record<string, unknown>;
  } catch (err) {
    return sendJson(res, 400, { error: { message: `invalid body: ${(err as Error).message}`, type: 'BadRequestError', code: 400 } });
  }
  const messages = api === 'chat' && Array.isArray(body.messages) ? (body.messages as unknown[]) : null;
  if (api === 'chat' && !messages) return sendJson(res, 400, { error: { message: 'messages is required', type: 'BadRequestError', code: 400 } });
  const header = req.headers['x-request-id'];
  const asked = askedOf(api, body, typeof header === 'string' && header ? header : `fake-${process.pid}-${++nextId}`);
  memory.observe(messages);
  if (messages) memory.remember(messages, answerText(asked));
  if (!asked.stream) return sendJson(res, 200, wholeAnswer(asked));
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
  // One write a chunk, as an engine emits tokens: the router sees a stream, not one buffer.
  for (const event of streamEvents(asked)) res.write(event);
  res.end();
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? '/').split('?')[0];
  const method = req.method ?? 'GET';
  if (method === 'POST' && path === '/v1/chat/completions') return generation('chat', req, res);
  if (method === 'POST' && path === '/v1/completions') return generation('completions', req, res);
  if (method === 'GET' && (path === '/health' || path === '/ping')) return void res.writeHead(200, { 'content-length': 0 }).end();
  if (method === 'GET' && path === '/v1/models') return sendJson(res, 200, modelList());
  if (method === 'GET' && path === '/stats') return sendJson(res, 200, memory.stats());
  if (method === 'POST' && path === '/stats/reset') {
    memory.reset();
    return sendJson(res, 200, memory.stats());
  }
  if (method === 'POST' && path === '/stats/forget') {
    memory.forget();
    return sendJson(res, 200, memory.stats());
  }
  if (method === 'POST' && path === '/tokenize') {
    const body = JSON.parse((await readBody(req)) || '{}') as Record<string, unknown>;
    const tokens = askedOf(Array.isArray(body.messages) ? 'chat' : 'completions', body, 'tokenize').promptIds;
    return sendJson(res, 200, { count: tokens.length, max_model_len: 32768, tokens, token_strs: null });
  }
  if (path === '/inference/v1/generate') {
    // What vLLM answers without --enable-scale-out: the router's adapter then goes on to /v1/completions.
    await readBody(req);
    return sendJson(res, 403, { error: { message: 'scale-out is not enabled', type: 'PermissionDeniedError', code: 403 } });
  }
  await readBody(req);
  // A router asking for something no vLLM serves is worth knowing once (its probes, its model discovery).
  if (!unknownPaths.has(`${method} ${path}`)) {
    unknownPaths.add(`${method} ${path}`);
    process.stderr.write(`[fake-engine ${process.pid}] 404 for ${method} ${path}\n`);
  }
  sendJson(res, 404, { error: { message: `no route ${method} ${path}`, type: 'NotFoundError', code: 404 } });
}

function main(): void {
  const i = process.argv.indexOf('--port');
  const port = i >= 0 ? Number(process.argv[i + 1]) : 0;
  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: { message: String(err), type: 'InternalServerError', code: 500 } });
      else res.destroy();
    });
  });
  // Longer than any router's idle pool timeout: a pooled connection the engine closes under a router
  // that is about to reuse it is a failed request that is the engine's fault, not the router's.
  server.keepAliveTimeout = 300_000;
  server.headersTimeout = 310_000;
  server.listen(port, '127.0.0.1', () => {
    const address = server.address();
    process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : port })}\n`);
  });
  process.on('SIGTERM', () => {
    server.close();
    server.closeAllConnections();
    process.exit(0);
  });
}

main();
