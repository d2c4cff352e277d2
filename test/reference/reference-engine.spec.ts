import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually } from '@robustrl/testing/eventually';
import { EnginePool, InMemoryTrajectoryRecorder, OpenAiRouter } from '../../services/rollout-manager/src/router';
import { freePort } from '@robustrl/testing/free-port';

const CLIENT = join(__dirname, '..', '..', 'clients', 'python', 'robustrl_reference.py');
const VERSION = 4;
const TOOL_ROUNDS = 2;

/**
 * The Python reference engine (clients/python/robustrl_reference.py, what the chaos campaign runs on
 * rollout machines) behind the real router: it must speak what the router expects — health probes,
 * chat completions, failover when one is killed — and serve the version its agent holds, which it
 * writes into every answer.
 */
describe('the reference engine behind the router', () => {
  let dir: string;
  let agent: Server;
  let engines: ChildProcess[];
  let pool: EnginePool;
  let router: OpenAiRouter;
  let recorder: InMemoryTrajectoryRecorder;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'robustrl-reference-'));
    // The weights of VERSION exactly as the reference trainer writes them (weights_bytes), made by Python itself.
    const weights = join(dir, `v${VERSION}`);
    const made = spawn('python3', [
      '-c',
      `import sys; sys.path.insert(0, ${JSON.stringify(join(CLIENT, '..'))}); import robustrl_reference as r; open(${JSON.stringify(weights)}, 'wb').write(r.weights_bytes(${VERSION}))`,
    ]);
    await new Promise((r) => made.once('exit', r));
    // One fake agent for the three engines: it holds VERSION whole and accepts every report.
    agent = createServer((req, res) => {
      req.resume();
      const body = req.url === '/v1/weights/latest' ? { version: VERSION, step: VERSION, path: weights, totalBytes: 2 * 64 * 1024 } : { accepted: true };
      res.writeHead(req.url === '/v1/weights/latest' ? 200 : 202, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    await new Promise<void>((r) => agent.listen(0, '127.0.0.1', r));
    const agentUrl = `http://127.0.0.1:${(agent.address() as AddressInfo).port}`;
    const ports = await Promise.all([0, 1, 2].map(() => freePort()));
    engines = ports.map((port) =>
      spawn('python3', [CLIENT, 'engine', '--state-dir', dir, '--port', String(port), '--tool-rounds', String(TOOL_ROUNDS), '--token-seconds', '0.01'], {
        env: { ...process.env, ROBUSTRL_AGENT_URL: agentUrl, PYTHONDONTWRITEBYTECODE: '1' },
        stdio: 'ignore',
      }),
    );
    pool = new EnginePool(
      ports.map((port, i) => ({ id: `engine-${i}`, baseUrl: `http://127.0.0.1:${port}`, weightVersion: VERSION })),
      { probeIntervalMs: 100, probeTimeoutMs: 500 },
    );
    pool.startProbing();
    // Up, and loaded: an engine answers 503 until it holds weights.
    await eventually('the engines to serve', async () => ((await Promise.all(ports.map((p) => loaded(p)))).every(Boolean) ? true : undefined), 20_000);
    recorder = new InMemoryTrajectoryRecorder();
    router = new OpenAiRouter({ pool, recorder, noEngineDeadlineMs: 5_000, logger: { info: () => undefined, warn: () => undefined, error: () => undefined } });
    await router.listen(0, '127.0.0.1');
  }, 60_000);

  afterAll(async () => {
    await router?.close();
    await pool?.stop();
    for (const e of engines ?? []) e.kill('SIGKILL');
    await new Promise((r) => agent?.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs multi-turn tool-calling trajectories through an engine killed with kill -9: all complete, every turn from the version held', async () => {
    const trajectories = Array.from({ length: 6 }, (_, i) => `p${i}`);
    // Killed while it answers (each answer takes ~160 ms): the kill waits for a request in it, not for a
    // fixed time, which on a loaded machine could come before any request or between two.
    const killed = eventually('a request in engine-0', () => ((pool.get('engine-0')?.inFlight ?? 0) > 0 ? true : undefined), 20_000).then(() =>
      engines[0].kill('SIGKILL'),
    );
    const conversations = await Promise.all(trajectories.map((p) => agentLoop(router.url, p)));
    await killed;
    for (const [i, conversation] of conversations.entries()) {
      const assistant = conversation.filter((m) => m.role === 'assistant');
      expect(assistant).toHaveLength(TOOL_ROUNDS + 1);
      expect(assistant.every((m) => String(m.content).startsWith(`v${VERSION}: `))).toBe(true);
      const { turns } = recorder.trajectory(`job-ref/${trajectories[i]}/0`);
      expect(turns.map((t) => t.kind)).toEqual(['tool-call', 'tool-result', 'tool-call', 'tool-result', 'model-output']);
      expect(turns.filter((t) => t.kind !== 'tool-result').map((t) => t.weightVersion)).toEqual([VERSION, VERSION, VERSION]);
    }
    expect(pool.get('engine-0')?.alive).toBe(false);
    // Killed mid-answer: its trajectories failed over.
    expect(router.stats.failovers).toBeGreaterThan(0);
    expect(router.stats.recordingErrors).toBe(0);
  }, 60_000);
});

interface Message {
  role: string;
  content?: unknown;
  tool_calls?: Array<{ id: string }>;
  tool_call_id?: string;
}

/** An agent loop: chat until the answer has no tool call, answering each call with a tool message. */
async function agentLoop(url: string, prompt: string): Promise<Message[]> {
  const messages: Message[] = [
    { role: 'system', content: 'reference job' },
    { role: 'user', content: `task ${prompt}` },
  ];
  for (let round = 0; round < 10; round++) {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-robustrl-job': 'job-ref', 'x-robustrl-prompt': prompt, 'x-robustrl-sample': '0' },
      body: JSON.stringify({ model: 'reference', messages }),
    });
    if (res.status !== 200) throw new Error(`router answered ${res.status}: ${await res.text()}`);
    const message = ((await res.json()) as { choices: Array<{ message: Message }> }).choices[0].message;
    messages.push(message);
    if (!message.tool_calls?.length) return messages;
    for (const call of message.tool_calls) messages.push({ role: 'tool', tool_call_id: call.id, content: `result of ${call.id}` });
  }
  throw new Error(`trajectory ${prompt} did not finish in 10 rounds`);
}

async function loaded(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/health`);
    return res.ok && ((await res.json()) as { version: number | null }).version === VERSION;
  } catch {
    return false;
  }
}
