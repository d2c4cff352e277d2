import { ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

const REPO_ROOT = resolve(__dirname, '..', '..');
/** USER_HZ, the unit of /proc's CPU times: 100 on every Linux build that matters. */
const CLOCK_TICKS_PER_SECOND = 100;

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

  /** CPU time (user + system) the process has used so far, in ms, from /proc; null when it is not running or there is no /proc. */
  cpuMs(): number | null {
    const pid = this.child?.pid;
    if (pid === undefined || !this.running) return null;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // "pid (comm) state …": fields after the comm's closing parenthesis; utime and stime are the 14th and 15th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
    } catch {
      return null;
    }
  }

  tail(n = 20): string {
    return this.lines
      .slice(-n)
      .map((l) => l.text)
      .join('\n');
  }
}
