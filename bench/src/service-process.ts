import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';

const REPO_ROOT = resolve(__dirname, '..', '..');

export type DecidingService = 'detector' | 'controller' | 'rollout-manager';

/** A service as a deployment runs it: its built main in its own process, its log lines kept with when they came. */
export class ServiceProcess {
  readonly lines: Array<{ at: number; text: string }> = [];
  startedAt = 0;
  private child?: ChildProcess;

  constructor(
    readonly service: DecidingService,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  start(): void {
    this.lines.length = 0;
    this.startedAt = Date.now();
    // BENCH_SERVICE_NODE_ARGS: extra Node options for the service, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it.
    const nodeArgs = (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, resolve(REPO_ROOT, 'services', this.service, 'dist', 'main.js')], {
      env: { ...process.env, ROBUSTRL_HTTP_PORT: 'off', ROBUSTRL_ORCHESTRATOR: 'none', ...this.env, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const collect = (b: Buffer) => {
      const at = Date.now();
      for (const text of b.toString().split('\n')) if (text.trim()) this.lines.push({ at, text });
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    this.child = child;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill(signal);
    await exited;
  }

  /** Milliseconds from start to the first line matching, or null. */
  at(pattern: RegExp): number | null {
    const line = this.lines.find((l) => pattern.test(l.text));
    return line ? line.at - this.startedAt : null;
  }

  /** Rows its last start read: `state loaded: N job snapshot(s) and M inbox row(s)` (none logged: nothing to load). */
  loaded(): { snapshotRows: number; inboxRows: number } {
    const m = this.lines.map((l) => /state loaded: (\d+) job snapshot\(s\) and (\d+) inbox row\(s\)/.exec(l.text)).find((x) => x !== null);
    return m ? { snapshotRows: Number(m[1]), inboxRows: Number(m[2]) } : { snapshotRows: 0, inboxRows: 0 };
  }

  tail(n = 20): string {
    return this.lines
      .slice(-n)
      .map((l) => l.text)
      .join('\n');
  }
}
