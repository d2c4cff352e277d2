import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { freePort } from '../chaos/private-infra';

/**
 * Real inference engines for benchmarks and tests (tests import it from
 * `@robustrl/harness`): llama.cpp's `llama-server` processes serving the tiny
 * random model that `deploy/local/llama.sh ensure` builds and writes (the integration tier's global
 * setup runs it). Each is a separate OS process, so a test can SIGKILL one mid-stream or SIGSTOP it to
 * make it hang, as a real engine dies or wedges.
 */
export interface LlamaEngine {
  readonly id: string;
  readonly url: string;
  readonly pid: number;
  /** SIGKILL: the process is gone, its connections reset. */
  kill(): void;
  /** SIGSTOP: the process hangs — its sockets stay open and answer nothing (not even /health). */
  hang(): void;
  /** SIGCONT after hang(). */
  resume(): void;
  /** Resolves when the process has exited. */
  readonly exited: Promise<void>;
}

// From libs/harness/src/engines (jest) or libs/harness/dist/engines (node): four levels up is the repository.
const REPO_ROOT = resolve(__dirname, '..', '..', '..', '..');

/** The server binary and model paths (`llama.sh status`); throws with the fix when they are not built. */
export function llamaPaths(): { server: string; model: string } {
  try {
    const [server, model] = execFileSync('bash', [resolve(REPO_ROOT, 'deploy/local/llama.sh'), 'status'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    })
      .trim()
      .split('\n');
    return { server, model };
  } catch {
    throw new Error("llama-server is not built: run `bash deploy/local/llama.sh ensure` (the integration tests' global setup does)");
  }
}

export async function startLlamaEngines(count: number, options: { slots?: number; contextPerSlot?: number; idPrefix?: string } = {}): Promise<LlamaEngine[]> {
  const { server, model } = llamaPaths();
  const slots = options.slots ?? 4;
  const engines = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const port = await freePort();
      const child = spawn(
        server,
        [
          '-m',
          model,
          '--host',
          '127.0.0.1',
          '--port',
          String(port),
          '-c',
          String(slots * (options.contextPerSlot ?? 512)),
          '-np',
          String(slots),
          '-t',
          '1',
          '--log-disable',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
      const engine = handle(`${options.idPrefix ?? 'llama'}-${i + 1}`, `http://127.0.0.1:${port}`, child);
      await waitHealthy(engine, child, () => stderr);
      return engine;
    }),
  );
  return engines;
}

function handle(id: string, url: string, child: ChildProcess): LlamaEngine {
  const exited = new Promise<void>((resolveExit) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolveExit();
    child.once('exit', () => resolveExit());
  });
  const signal = (s: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(s);
  };
  return { id, url, pid: child.pid!, kill: () => signal('SIGKILL'), hang: () => signal('SIGSTOP'), resume: () => signal('SIGCONT'), exited };
}

async function waitHealthy(engine: LlamaEngine, child: ChildProcess, stderr: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`llama-server ${engine.id} exited with ${child.exitCode}: ${stderr()}`);
    try {
      const res = await fetch(`${engine.url}/health`);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  engine.kill();
  throw new Error(`llama-server ${engine.id} was not healthy within 60 s: ${stderr()}`);
}
