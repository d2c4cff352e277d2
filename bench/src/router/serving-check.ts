import { request } from 'node:http';
import type { BenchChild } from './bench-child';
import type { RunningTarget } from './target-types';

/** One small chat request; its status, or 0 when nothing answered. */
function tryChat(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const body = JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: 'ready?' }], max_tokens: 1 });
  return new Promise((resolve) => {
    const u = new URL(url);
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        method: 'POST',
        path: '/v1/chat/completions',
        agent: false,
        timeout: 5_000,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (b: Buffer) => parts.push(b));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8') }));
        res.on('error', () => resolve({ status: 0, body: '' }));
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.end(body);
  });
}

/**
 * Wait until a router answers a chat request with 200: serving, not only listening (a gateway listens
 * before its workers pass their health checks, a robustrl router before its engines' first probe).
 * Fails when one of `processes` exits first, or after `timeoutMs`, with the last answer and their output.
 */
export async function waitServing(
  url: string,
  processes: readonly BenchChild[],
  timeoutMs: number,
  /** Each attempt's extra headers (a recorded trajectory's identity, new each time). */
  headers: () => Record<string, string> = () => ({}),
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = { status: 0, body: '' };
  for (;;) {
    const gone = processes.find((p) => !p.running);
    if (gone) throw new Error(`${gone.name} exited (${gone.exitDescription()}) before serving\n${gone.tail()}`);
    last = await tryChat(url, headers());
    if (last.status === 200) return;
    if (Date.now() > deadline) {
      const tails = processes.map((p) => `${p.name}:\n${p.tail()}`).join('\n');
      throw new Error(`${url} not serving after ${timeoutMs} ms (last answer: ${last.status} ${last.body.slice(0, 200)})\n${tails}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** A router that is one process: serving at `url` within `timeoutMs`, or stopped and the reason thrown. */
export async function oneProcessRouter(child: BenchChild, url: string, launch: string[], timeoutMs: number): Promise<RunningTarget> {
  try {
    await waitServing(url, [child], timeoutMs);
  } catch (err) {
    await child.stop();
    throw err;
  }
  return {
    urls: [url],
    processes: [{ role: 'router', pids: () => (child.pid !== undefined && child.running ? [child.pid] : []) }],
    launch,
    stop: () => child.stop(),
  };
}
