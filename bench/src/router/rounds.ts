import type { CpuRole, LevelResult } from './measure';
import type { Level } from './options';
import type { LevelFailure, TargetRun } from './run-types';

/**
 * Rounds of bench:router (`--rounds N`). One run of a configuration varies by ±10–20 % on a shared
 * two-core host (docs/benchmarks.md "The router on every request"), more than most changes it is asked
 * to judge. Each round runs every target once, so a round's ratios compare runs made minutes apart,
 * in the given order and its reverse by turns (`roundOrder`), so a drift of the shared host over a run
 * does not always favour the targets measured first; the report gives the median of each figure over the rounds and, for ratios, the median
 * of the per-round ratios with their range. Pure: runs in, runs or numbers out.
 */

/** The targets in the order round `round` (from 0) runs them: as given, then reversed, by turns. */
export function roundOrder<T>(targets: readonly T[], round: number): T[] {
  return round % 2 === 0 ? [...targets] : [...targets].reverse();
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

const measured = (r: LevelResult | LevelFailure | undefined): r is LevelResult => r !== undefined && 'load' in r;

function medianOrNull(xs: ReadonlyArray<number | null>): number | null {
  const known = xs.filter((x): x is number => x !== null);
  return known.length === 0 ? null : median(known);
}

/** One level over the rounds: medians of rates, latencies, CPU and window; errors and counts summed. */
export function mergeLevel(level: Level, results: readonly LevelResult[]): LevelResult {
  const roles = new Set(results.flatMap((r) => Object.keys(r.cpuMsPerRequest) as CpuRole[]));
  const cpuMsPerRequest: Partial<Record<CpuRole, number>> = {};
  for (const role of roles) cpuMsPerRequest[role] = median(results.flatMap((r) => (r.cpuMsPerRequest[role] === undefined ? [] : [r.cpuMsPerRequest[role]!])));
  const recorded = results.map((r) => r.recorded).filter((x): x is number => typeof x === 'number');
  return {
    level,
    load: {
      requests: results.reduce((s, r) => s + r.load.requests, 0),
      seconds: results.reduce((s, r) => s + r.load.seconds, 0),
      requestsPerSecond: median(results.map((r) => r.load.requestsPerSecond)),
      p50Ms: medianOrNull(results.map((r) => r.load.p50Ms)),
      p99Ms: medianOrNull(results.map((r) => r.load.p99Ms)),
      errors: results.reduce((s, r) => s + r.load.errors, 0),
      errorSamples: [...new Set(results.flatMap((r) => r.load.errorSamples))].slice(0, 5),
    },
    cpuMsPerRequest,
    affinity: results.reduce(
      (s, r) => ({
        requests: s.requests + r.affinity.requests,
        multiTurnRequests: s.multiTurnRequests + r.affinity.multiTurnRequests,
        hits: s.hits + r.affinity.hits,
      }),
      {
        requests: 0,
        multiTurnRequests: 0,
        hits: 0,
      },
    ),
    ...(results.some((r) => r.recorded !== undefined) ? { recorded: recorded.length > 0 ? recorded.reduce((s, x) => s + x, 0) : null } : {}),
    observedWindowMs: median(results.map((r) => r.observedWindowMs)),
  };
}

/**
 * The runs of each target and workload over the rounds as one run each, in first-seen order. A level
 * that failed in every round stays a failure (the first round's); one that failed in some is merged
 * from the rounds it ran in. A target that never started keeps its error.
 */
export function mergeRounds(runs: readonly TargetRun[]): TargetRun[] {
  const groups = new Map<string, TargetRun[]>();
  for (const run of runs) {
    const key = `${run.target}\u0000${run.workload}`;
    groups.set(key, [...(groups.get(key) ?? []), run]);
  }
  return [...groups.values()].map((group) => {
    const started = group.filter((r) => r.error === null);
    if (started.length === 0) return group[0];
    const levels = started[0].levels.map((first) => {
      const results = started.map((r) => r.levels.find((l) => l.level === first.level)).filter(measured);
      return results.length === 0 ? first : mergeLevel(first.level, results);
    });
    return { ...started[0], round: undefined, rounds: started.length, levels };
  });
}

/** requests/s of `target` over `base` at `level`, one ratio per round both ran in. */
export function roundRatios(runs: readonly TargetRun[], target: string, base: string, level: Level): number[] {
  const rounds = [...new Set(runs.map((r) => r.round ?? 0))];
  return rounds.flatMap((round) => {
    const at = (name: string) => runs.find((r) => r.target === name && (r.round ?? 0) === round)?.levels.find((l) => l.level === level);
    const a = at(target);
    const b = at(base);
    return measured(a) && measured(b) && b.load.requestsPerSecond > 0 ? [a.load.requestsPerSecond / b.load.requestsPerSecond] : [];
  });
}
