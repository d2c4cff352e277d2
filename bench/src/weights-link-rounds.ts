/** Per-round statistics of the single-link benchmark (weights-link.ts): a round's median, the runs' aggregate, paired ratios. */
import { median } from './bench-kit';
import { MIB, Ratio, Throughput } from './weights-link-types';

/** One round of one tool. */
export interface Round {
  medianMiBps: number;
  bestMiBps: number | null;
  bytes: number;
  seconds: number;
}

export function roundOf(sizeBytes: number, timesMs: readonly number[]): Round {
  const mibps = (ms: number) => sizeBytes / MIB / (ms / 1000);
  return {
    medianMiBps: mibps(median(timesMs)),
    bestMiBps: mibps(Math.min(...timesMs)),
    bytes: sizeBytes * timesMs.length,
    seconds: timesMs.reduce((s, t) => s + t, 0) / 1000,
  };
}

export function aggregate(rounds: readonly Round[]): Throughput {
  const bests = rounds.map((r) => r.bestMiBps);
  return {
    medianMiBps: median(rounds.map((r) => r.medianMiBps)),
    bestMiBps: bests.some((b) => b === null) ? null : Math.max(...(bests as number[])),
    meanMiBps: rounds.reduce((s, r) => s + r.bytes, 0) / MIB / rounds.reduce((s, r) => s + r.seconds, 0),
    roundMedianMiBps: rounds.map((r) => r.medianMiBps),
  };
}

export function pairedRatio(a: readonly Round[], b: readonly Round[]): Ratio | null {
  if (a.length === 0 || a.length !== b.length) return null;
  const rs = a.map((r, i) => r.medianMiBps / b[i].medianMiBps);
  return { median: median(rs), min: Math.min(...rs), max: Math.max(...rs) };
}
