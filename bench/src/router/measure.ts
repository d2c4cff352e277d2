import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AffinityStats } from './affinity-memory';
import { BenchChild } from './bench-child';
import type { Engines } from './bench-infra';
import type { Level } from './options';
import { CpuWindow } from './proc-cpu';
import type { ProcessRole, RunningTarget } from './targets';
import type { LoadConfig, LoadEvent, LoadResult } from './workloads';

/** Whose CPU the tables show: the target's own processes, then what every target shares. */
export type CpuRole = ProcessRole | 'engines' | 'load generator';
export const CPU_ROLES: readonly CpuRole[] = ['router', 'request manager', 'PostgreSQL', 'Kafka broker', 'engines', 'load generator'];

export interface LevelResult {
  level: Level;
  load: LoadResult;
  /** CPU ms per completed request of each role the target has (and the engines and load generator). */
  cpuMsPerRequest: Partial<Record<CpuRole, number>>;
  /** Summed over the engines' /stats for the timed window. */
  affinity: AffinityStats;
  /** Trajectories the store holds of the level's batch, warm-up included (null: no trajectory table). */
  recorded?: number | null;
  /** The window as the bench saw it (its CPU readings' interval): near `seconds`, else the host was starved. */
  observedWindowMs: number;
}

async function engineCall(url: string, method: 'GET' | 'POST'): Promise<AffinityStats> {
  const res = await fetch(url, { method, signal: AbortSignal.timeout(5_000) });
  if (!res.ok) throw new Error(`${method} ${url}: HTTP ${res.status}`);
  return (await res.json()) as AffinityStats;
}

async function engineStats(engines: Engines, reset: boolean): Promise<AffinityStats> {
  const all = await Promise.all(engines.urls.map((u) => (reset ? engineCall(`${u}/stats/reset`, 'POST') : engineCall(`${u}/stats`, 'GET'))));
  return all.reduce((s, x) => ({ requests: s.requests + x.requests, multiTurnRequests: s.multiTurnRequests + x.multiTurnRequests, hits: s.hits + x.hits }), {
    requests: 0,
    multiTurnRequests: 0,
    hits: 0,
  });
}

/** Every engine forgets the conversations it served: each configuration starts on cold engines. */
export async function enginesForget(engines: Engines): Promise<void> {
  await Promise.all(engines.urls.map((u) => engineCall(`${u}/stats/forget`, 'POST')));
}

/**
 * One level against a running target: a load-generator process for its warm-up and timed window. The
 * processes' CPU is read and the engines' counters reset when the window opens, read again when it
 * closes, both on the load generator's word.
 */
export async function runLevel(
  target: RunningTarget,
  engines: Engines,
  level: Level,
  config: Omit<LoadConfig, 'urls' | 'stream' | 'concurrency'>,
): Promise<LevelResult> {
  const load: LoadConfig = { ...config, urls: target.urls, stream: level.stream, concurrency: level.concurrency };
  const generator = new BenchChild('load-generator', process.execPath, [resolve(__dirname, 'load-generator.js'), JSON.stringify(load)]);
  const groups: Array<{ role: CpuRole; pids: () => number[] }> = [
    ...target.processes,
    { role: 'engines', pids: () => engines.children.flatMap((c) => (c.pid !== undefined && c.running ? [c.pid] : [])) },
    { role: 'load generator', pids: () => (generator.pid !== undefined && generator.running ? [generator.pid] : []) },
  ];
  let windows: Array<{ role: CpuRole; cpu: CpuWindow }> | null = null;
  let openedAt = 0;
  let observedWindowMs = 0;
  let cpuMs: Array<{ role: CpuRole; ms: number }> = [];
  let resetDone: Promise<unknown> = Promise.resolve();
  // Set by the line handler: typed by assertion, since control-flow narrowing does not see the callback.
  let statsRead = null as Promise<AffinityStats> | null;
  let result = null as LoadResult | null;
  generator.onLine((line) => {
    if (!line.startsWith('{"event"')) return;
    const event = JSON.parse(line) as LoadEvent;
    if (event.event === 'window-start') {
      openedAt = performance.now();
      windows = groups.map((g) => ({ role: g.role, cpu: new CpuWindow(g.pids) }));
      resetDone = engineStats(engines, true);
    } else if (event.event === 'window-end') {
      cpuMs = (windows ?? []).map((w) => ({ role: w.role, ms: w.cpu.end() }));
      observedWindowMs = performance.now() - openedAt;
      statsRead = resetDone.then(() => engineStats(engines, false));
    } else result = event.result;
  });
  await generator.whenExited();
  if (!result) throw new Error(`the load generator ended (${generator.exitDescription()}) without a result\n${generator.tail()}`);
  const done = result;
  const affinity = statsRead ? await statsRead : { requests: 0, multiTurnRequests: 0, hits: 0 };
  const cpuMsPerRequest: Partial<Record<CpuRole, number>> = {};
  for (const { role, ms } of cpuMs) cpuMsPerRequest[role] = done.requests > 0 ? ms / done.requests : 0;
  return { level, load: done, cpuMsPerRequest, affinity, observedWindowMs };
}
