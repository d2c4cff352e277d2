import { ChildProcess, spawn } from 'node:child_process';

export interface RoleExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** False when the agent itself stopped the process (restart, promotion, shutdown). */
  unexpected: boolean;
}

/**
 * The role process of this machine (trainer or rollout worker), started by the agent the way a
 * launcher like torchrun's elastic agent does: as a child leading its own process group, so stopping
 * it stops everything it spawned. An exit the agent did not ask for is a fault signal.
 */
export class RoleProcess {
  private child: ChildProcess | null = null;
  private stopping = false;
  startedAt: number | null = null;
  restarts = 0;

  constructor(
    private readonly options: {
      stopGraceMs: number;
      onExit: (exit: RoleExit) => void;
      onOutput?: (line: string) => void;
    },
  ) {}

  private readonly killOnExit = () => {
    if (this.child?.pid !== undefined) killGroup(this.child.pid, 'SIGKILL');
  };

  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  get running(): boolean {
    return this.child !== null;
  }

  /** Start `command` (a shell command line); resolves once it is spawned, rejects if it cannot be. */
  start(command: string, env: Record<string, string>): Promise<number> {
    if (this.child) throw new Error(`role process already running (pid ${this.child.pid})`);
    return new Promise((resolve, reject) => {
      const child = spawn('/bin/sh', ['-c', command], { env: { ...process.env, ...env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      const forward = (chunk: Buffer) => {
        for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) this.options.onOutput?.(line);
      };
      child.stdout?.on('data', forward);
      child.stderr?.on('data', forward);
      child.once('error', (err) => {
        if (this.child === child) this.child = null;
        reject(new Error(`cannot start role process '${command}': ${err.message}`));
      });
      child.once('spawn', () => {
        this.child = child;
        // If the agent dies on an error, its role process goes with it rather than run unsupervised.
        process.once('exit', this.killOnExit);
        this.startedAt = Date.now();
        resolve(child.pid!);
      });
      child.once('exit', (code, signal) => {
        if (this.child !== child) return;
        this.child = null;
        process.removeListener('exit', this.killOnExit);
        const unexpected = !this.stopping;
        this.stopping = false;
        this.options.onExit({ code, signal, unexpected });
      });
    });
  }

  /** SIGTERM the process group, SIGKILL it after the grace period; resolves when it has exited. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.pid === undefined) return;
    this.stopping = true;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    killGroup(child.pid, 'SIGTERM');
    const timer = setTimeout(() => killGroup(child.pid!, 'SIGKILL'), this.options.stopGraceMs);
    await exited;
    clearTimeout(timer);
  }

  async restart(command: string, env: Record<string, string>): Promise<number> {
    await this.stop();
    this.restarts += 1;
    return this.start(command, env);
  }
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone: exactly what stop wants.
  }
}
