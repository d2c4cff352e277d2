import { ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { alive, signalAll, treeOf } from './process-tree';

export interface RoleExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** False when the agent itself stopped the process (restart, promotion, shutdown). */
  unexpected: boolean;
}

/**
 * The role process of this machine (trainer or rollout worker), started by the agent the way a
 * launcher like torchrun's elastic agent does. It stays in the agent's process group, so taking the
 * machine down (the group) takes it too; stopping only the role signals its process tree. An exit the
 * agent did not ask for is a fault signal.
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
      /** The agent's own credentials: names of its environment the role process does not inherit. */
      withheldEnv?: readonly string[];
    },
  ) {}

  private readonly killOnExit = () => {
    if (this.child?.pid !== undefined) signalAll(treeOf(this.child.pid), 'SIGKILL');
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
      const inherited = { ...process.env };
      for (const name of this.options.withheldEnv ?? []) delete inherited[name];
      const child = spawn('/bin/sh', ['-c', command], { env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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

  /**
   * SIGTERM the role's process tree, SIGKILL what is left of it after the grace period; resolves when
   * all of it is gone. The tree is taken before signalling: a child whose parent dies first is
   * re-parented away from it and would otherwise escape the SIGKILL.
   */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.pid === undefined) return;
    this.stopping = true;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const tree = treeOf(child.pid);
    signalAll(tree, 'SIGTERM');
    const deadline = Date.now() + this.options.stopGraceMs;
    while (tree.some(alive) && Date.now() < deadline) await sleep(25);
    if (tree.some(alive)) {
      // Survivors may have forked since the snapshot: take their trees too.
      const survivors = [...new Set([...tree, ...tree.filter(alive).flatMap(treeOf)])];
      signalAll(survivors, 'SIGKILL');
      const killDeadline = Date.now() + 5_000;
      while (survivors.some(alive) && Date.now() < killDeadline) await sleep(25);
    }
    await exited;
  }

  async restart(command: string, env: Record<string, string>): Promise<number> {
    await this.stop();
    this.restarts += 1;
    return this.start(command, env);
  }
}
