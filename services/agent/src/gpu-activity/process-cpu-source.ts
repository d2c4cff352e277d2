import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { descendantsOf } from '../process-tree';
import { clampUnit, GpuActivityReading, GpuActivitySource } from './gpu-activity-source';

export interface ProcessCpuSourceOptions {
  /** Whose descendants are the role processes: the agent itself by default. */
  root?: number;
  /** The machine's GPUs: a role process busy on this many CPU cores reads as fully active. */
  gpus: number;
  /** Clock in ms, injectable for tests. */
  now?: () => number;
  /** CPU seconds a process has used so far, or null when it is gone; injectable for tests. */
  cpuSeconds?: (pid: number) => number | null;
  /** The role processes now; injectable for tests. */
  processes?: (root: number) => number[];
}

/**
 * Activity measured from what the role processes really do, for machines without GPUs (CPU engines
 * and CPU training in tests and campaigns): the CPU time the agent's role process tree used since the
 * last sample, per wall second, per GPU the machine claims — one busy core standing for one busy GPU.
 * It is a stand-in for tensor-core activity and says so in its kind (`process-cpu`); it is never
 * chosen unless asked for (ROBUSTRL_GPU_SOURCE=process-cpu).
 *
 * What it gets right that a pushed constant cannot: a rank blocked on a dead peer, an engine with no
 * requests, a trainer waiting for its batch all read near zero. What it gets wrong the other way: a
 * process that spins while it waits reads as busy.
 */
export class ProcessCpuSource implements GpuActivitySource {
  readonly kind = 'process-cpu' as const;
  private readonly root: number;
  private readonly now: () => number;
  private readonly cpuSeconds: (pid: number) => number | null;
  private readonly processes: (root: number) => number[];
  private last: { at: number; used: Map<number, number> };

  constructor(private readonly options: ProcessCpuSourceOptions) {
    if (!(options.gpus > 0)) throw new RangeError(`gpus must be positive, got ${options.gpus}`);
    this.root = options.root ?? process.pid;
    this.now = options.now ?? Date.now;
    this.cpuSeconds = options.cpuSeconds ?? procCpuSeconds;
    this.processes = options.processes ?? descendantsOf;
    this.last = { at: this.now(), used: this.read() };
  }

  async sample(): Promise<GpuActivityReading> {
    const at = this.now();
    const used = this.read();
    const seconds = (at - this.last.at) / 1000;
    let busy = 0;
    for (const [pid, total] of used) {
      // A process started since the last sample counts from zero: all its time falls in the window.
      busy += Math.max(0, total - (this.last.used.get(pid) ?? 0));
    }
    this.last = { at, used };
    if (seconds <= 0) return { tensorActive: 0, perGpu: [] };
    return { tensorActive: clampUnit(busy / seconds / this.options.gpus), perGpu: [] };
  }

  private read(): Map<number, number> {
    const used = new Map<number, number>();
    for (const pid of this.processes(this.root)) {
      const seconds = this.cpuSeconds(pid);
      if (seconds !== null) used.set(pid, seconds);
    }
    return used;
  }
}

let ticksPerSecond: number | undefined;

/** utime + stime of /proc/<pid>/stat in seconds, or null when the process is gone. */
export function procCpuSeconds(pid: number): number | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // Fields after the command name (which may hold spaces or ')'): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  ticksPerSecond ??= clockTicks();
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

function clockTicks(): number {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return ticks > 0 ? ticks : 100;
  } catch {
    return 100; // USER_HZ on every Linux the agent runs on
  }
}
