import { createServer, IncomingMessage, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { EnginePool } from './engine-pool';
import { OpenAiRouter } from './openai-router';

/**
 * A stream the router gives up on (the engine went silent) is aborted on the engine with the engine's
 * own call where it has one — SGLang's POST /abort_request {"rid"}, the rid being the one the router put
 * in the request — so its slot is freed even if the closed connection is not seen.
 */
async function body(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks).toString('utf8');
  return raw === '' ? {} : (JSON.parse(raw) as Record<string, unknown>);
}

describe('abandoned streams are aborted on the engine', () => {
  let server: Server;
  const aborts: Array<Record<string, unknown>> = [];
  const rids: unknown[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      void (async () => {
        const payload = await body(req);
        if (req.url === '/abort_request') {
          aborts.push(payload);
          return void res.writeHead(200).end();
        }
        if (req.url === '/health') return void res.writeHead(200).end();
        // Its scheduler is wedged: the generate probe fails (SGLang answers 503 after its own timeout).
        if (req.url === '/health_generate') return void res.writeHead(503).end();
        // A chat stream that sends two tokens and then hangs (a wedged scheduler).
        rids.push(payload.rid);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (const text of ['a', 'b'])
          res.write(
            `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: text }, finish_reason: null }] })}\n\n`,
          );
      })();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('SGLang: POST /abort_request with the rid the request carried', async () => {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const pool = new EnginePool([{ id: 'sg', baseUrl: url, kind: 'sglang' }], { probeIntervalMs: 0, probeTimeoutMs: 100 });
    const router = new OpenAiRouter({
      pool,
      upstreamIdleTimeoutMs: 300,
      noEngineDeadlineMs: 300,
      logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
    });
    await router.listen();
    try {
      const res = await fetch(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], stream: true }),
      });
      await res.text();
      await new Promise((r) => setTimeout(r, 200));
      expect(rids.length).toBeGreaterThan(0);
      expect(typeof rids[0]).toBe('string');
      expect(aborts).toContainEqual({ rid: rids[0] });
    } finally {
      await router.close();
      await pool.stop();
    }
  });
});
