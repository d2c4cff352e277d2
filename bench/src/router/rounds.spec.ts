import type { LevelResult } from './measure';
import type { Level } from './options';
import type { TargetRun } from './report';
import { renderReport } from './report';
import { median, mergeRounds, roundOrder, roundRatios } from './rounds';

const n64: Level = { stream: false, concurrency: 64 };
const s64: Level = { stream: true, concurrency: 64 };

function result(level: Level, rps: number, p50: number, routerCpu: number): LevelResult {
  return {
    level,
    load: { requests: rps * 8, seconds: 8, requestsPerSecond: rps, p50Ms: p50, p99Ms: p50 * 2, errors: 0, errorSamples: [] },
    cpuMsPerRequest: { router: routerCpu, engines: 0.2 },
    affinity: { requests: rps * 8, multiTurnRequests: 0, hits: 0 },
    observedWindowMs: 8_000,
  };
}

function run(target: string, round: number, rps: number[], cpu = 0.5): TargetRun {
  return {
    target,
    label: target,
    workload: 'single',
    launch: [],
    error: null,
    round,
    levels: [result(n64, rps[0], 30, cpu), result(s64, rps[1], 50, cpu)],
  };
}

describe('bench:router rounds: medians over rounds, ratios per round', () => {
  // The gateway's rate swings between rounds; the router's ratio to it holds steady.
  const runs = [
    run('sglang-gateway', 0, [2_000, 1_200]),
    run('robustrl-off', 0, [1_500, 900], 0.6),
    run('sglang-gateway', 1, [3_000, 1_500]),
    run('robustrl-off', 1, [2_400, 1_200], 0.5),
    run('sglang-gateway', 2, [2_500, 1_000]),
    run('robustrl-off', 2, [1_900, 700], 0.7),
  ];

  it('runs the targets in the given order, then reversed, by turns', () => {
    expect([0, 1, 2, 3].map((r) => roundOrder(['gateway', 'off', 'on'], r))).toEqual([
      ['gateway', 'off', 'on'],
      ['on', 'off', 'gateway'],
      ['gateway', 'off', 'on'],
      ['on', 'off', 'gateway'],
    ]);
  });

  it('median of an odd and an even count', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });

  it('merges each target into one run of medians, in first-seen order', () => {
    const merged = mergeRounds(runs);
    expect(merged.map((r) => [r.target, r.rounds])).toEqual([
      ['sglang-gateway', 3],
      ['robustrl-off', 3],
    ]);
    const off = merged[1].levels[0] as LevelResult;
    expect(off.load.requestsPerSecond).toBe(1_900);
    expect(off.load.requests).toBe((1_500 + 2_400 + 1_900) * 8);
    expect(off.cpuMsPerRequest.router).toBe(0.6);
  });

  it("a ratio is taken within each round, not between rounds' medians", () => {
    expect(roundRatios(runs, 'robustrl-off', 'sglang-gateway', n64)).toEqual([0.75, 0.8, 0.76]);
    const report = renderReport(runs, [n64, s64], ['single'], []);
    expect(report).toContain('medians over 3 rounds');
    expect(report).toContain('| robustrl-off vs sglang-gateway | 0.76× (0.75–0.80) · 1.00× | 0.75× (0.70–0.80) · 1.00× |');
  });

  it('a level that failed in one round is merged from the others; a target that never started keeps its error', () => {
    const failed: TargetRun = { ...run('robustrl-off', 3, [0, 0]), levels: [{ level: n64, error: 'load generator died' }, result(s64, 800, 50, 0.5)] };
    const never: TargetRun = { target: 'smg', label: 'smg', workload: 'single', launch: [], error: 'not installed', levels: [], round: 0 };
    const merged = mergeRounds([...runs, failed, never]);
    const off = merged.find((r) => r.target === 'robustrl-off')!;
    expect(off.rounds).toBe(4);
    expect((off.levels[0] as LevelResult).load.requestsPerSecond).toBe(1_900);
    expect((off.levels[1] as LevelResult).load.requestsPerSecond).toBe(850);
    expect(merged.find((r) => r.target === 'smg')!.error).toBe('not installed');
  });

  it('one round reads as before: no medians said, the plain ratio', () => {
    const report = renderReport(runs.slice(0, 2), [n64], ['single'], []);
    expect(report).not.toContain('medians over');
    expect(report).toContain('| robustrl-off vs sglang-gateway | 0.75× · 1.00× |');
  });
});
