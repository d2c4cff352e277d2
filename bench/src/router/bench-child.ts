import { ChildProcess, spawn } from 'node:child_process';
import { cpuMsOf } from './proc-cpu';

/** Every child still running: killed when the bench exits, however it exits (a gateway must not outlive it). */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * A process the router bench starts (an engine, a router, a gateway, a request manager, a load
 * generator): its output kept (the tail, to say why it failed), its CPU readable from /proc, and a
 * stop that does not wait forever.
 */
export class BenchChild {
  private readonly lines: string[] = [];
  private readonly child: ChildProcess;
  private readonly exited: Promise<void>;
  private readonly lineListeners = new Set<(line: string) => void>();

  constructor(
    readonly name: string,
    command: string,
    args: readonly string[],
    env: NodeJS.ProcessEnv = {},
  ) {
    this.child = spawn(command, args, { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    // A spawn failure (no such binary) is an 'error' event and no 'exit': kept as a line, seen as an exit.
    live.add(this.child);
    this.exited = new Promise((resolve) => {
      this.child.once('exit', () => {
        live.delete(this.child);
        resolve();
      });
      this.child.once('error', (err) => {
        this.keep(`spawn failed: ${err.message}`);
        resolve();
      });
    });
    // A read may end mid-line: each stream keeps its unfinished line until the rest comes.
    for (const stream of [this.child.stdout!, this.child.stderr!]) {
      let partial = '';
      stream.on('data', (b: Buffer) => {
        const parts = (partial + b.toString()).split('\n');
        partial = parts.pop() ?? '';
        for (const text of parts) if (text.trim()) this.keep(text);
      });
      stream.on('end', () => {
        if (partial.trim()) this.keep(partial);
      });
    }
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.pid !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** CPU time (user + system, all threads) used so far, in ms; null once it is gone. */
  cpuMs(): number | null {
    return this.running && this.child.pid !== undefined ? cpuMsOf(this.child.pid) : null;
  }

  /** Calls `listener` with each line it prints from now on. */
  onLine(listener: (line: string) => void): void {
    this.lineListeners.add(listener);
  }

  /** The first line (printed so far or later) that `pattern` matches; rejects if it exits first or after `timeoutMs`. */
  waitForLine(pattern: RegExp, timeoutMs: number): Promise<string> {
    const seen = this.lines.find((l) => pattern.test(l));
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const done = (fn: () => void) => {
        clearTimeout(timer);
        this.lineListeners.delete(listener);
        fn();
      };
      const listener = (line: string) => {
        if (pattern.test(line)) done(() => resolve(line));
      };
      const timer = setTimeout(() => done(() => reject(new Error(`${this.name}: no line matching ${pattern} in ${timeoutMs} ms\n${this.tail()}`))), timeoutMs);
      this.lineListeners.add(listener);
      void this.exited.then(() => done(() => reject(new Error(`${this.name} exited (${this.exitDescription()})\n${this.tail()}`))));
    });
  }

  /** Resolves when it has exited. */
  whenExited(): Promise<void> {
    return this.exited;
  }

  exitDescription(): string {
    return this.child.signalCode ? `signal ${this.child.signalCode}` : `code ${this.child.exitCode}`;
  }

  /** SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  tail(n = 15): string {
    return this.lines
      .slice(-n)
      .map((l) => `  | ${l}`)
      .join('\n');
  }

  private keep(line: string): void {
    this.lines.push(line);
    if (this.lines.length > 500) this.lines.splice(0, this.lines.length - 200);
    for (const listener of this.lineListeners) listener(line);
  }
}
