import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { resolve } from 'node:path';
import { freePort } from '../chaos/private-infra';

/**
 * A real vLLM engine for tests and benchmarks (tests import it from `@robustrl/harness`):
 * the GRPO example's engine (`python -m robustrl_grpo engine`: vLLM's OpenAI server with robustrl's
 * worker extension, the RL routes and the generate endpoint) from the environment
 * `deploy/local/vllm.sh ensure` makes. About 3.9 GiB and half a minute to start on a CPU machine: tests
 * start one, rarely two.
 */
export interface VllmEngine {
  readonly id: string;
  readonly url: string;
  readonly pid: number;
  /** SIGKILL to the engine's whole process group (API server, engine core, worker). */
  kill(): void;
  readonly exited: Promise<void>;
}

const REPO_ROOT = resolve(__dirname, '..', '..', '..', '..');

/** The venv's python and the example's base model (`vllm.sh status`); throws with the fix when not ready. */
export function vllmPaths(): { python: string; model: string } {
  try {
    const [python, model] = execFileSync('bash', [resolve(REPO_ROOT, 'deploy/local/vllm.sh'), 'status'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    })
      .trim()
      .split('\n');
    return { python, model };
  } catch {
    throw new Error("vLLM is not installed: run `bash deploy/local/vllm.sh ensure` (the integration tests' global setup does)");
  }
}

export async function startVllmEngine(options: { id?: string; logFile?: string; timeoutMs?: number } = {}): Promise<VllmEngine> {
  const { python, model } = vllmPaths();
  const port = await freePort();
  const log = openSync(options.logFile ?? '/dev/null', 'a');
  const child: ChildProcess = spawn(python, ['-m', 'robustrl_grpo', 'engine', '--model-dir', model, '--port', String(port)], {
    stdio: ['ignore', log, log],
    detached: true,
    env: { ...process.env, OMP_NUM_THREADS: '1' },
  });
  closeSync(log);
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const url = `http://127.0.0.1:${port}`;
  const engine: VllmEngine = {
    id: options.id ?? `vllm-${port}`,
    url,
    pid: child.pid!,
    kill: () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    },
    exited,
  };
  const deadline = Date.now() + (options.timeoutMs ?? 300_000);
  let gone = false;
  void exited.then(() => (gone = true));
  while (Date.now() < deadline) {
    if (gone) throw new Error(`the vLLM engine exited before it was healthy${options.logFile ? ` (log: ${options.logFile})` : ''}`);
    try {
      if ((await fetch(`${url}/health`)).status === 200) return engine;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  engine.kill();
  throw new Error(`the vLLM engine was not healthy within ${(options.timeoutMs ?? 300_000) / 1000} s`);
}
