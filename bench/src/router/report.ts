import { CPU_ROLES, LevelResult } from './measure';
import { Level, levelName } from './options';
import { median, mergeRounds, roundRatios } from './rounds';
import { RATIO_BASES } from './targets';
import type { Workload } from './workloads';
import type { LevelFailure, TargetRun } from './run-types';

export { LevelFailure, TargetRun } from './run-types';

const fmtInt = (x: number) => Math.round(x).toLocaleString('en-US');
const fmtMs = (x: number | null) => (x === null ? '–' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const fmtCpu = (x: number) => (x >= 10 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x.toFixed(3));
const fmtRatio = (x: number | null) => (x === null || !Number.isFinite(x) ? '–' : `${x.toFixed(2)}×`);
const short = (s: string) => s.split('\n')[0].slice(0, 120).replace(/\|/g, '/');

function measured(r: LevelResult | LevelFailure | undefined): r is LevelResult {
  return r !== undefined && 'load' in r;
}

function cellOf(run: TargetRun, level: Level): string {
  const r = run.levels.find((l) => l.level === level);
  if (r === undefined) return '';
  if (!measured(r)) return `failed: ${short(r.error)}`;
  const { requestsPerSecond, p50Ms, p99Ms, errors } = r.load;
  return `${fmtInt(requestsPerSecond)} · ${fmtMs(p50Ms)} · ${fmtMs(p99Ms)}${errors > 0 ? ` (${fmtInt(errors)} errors)` : ''}`;
}

function header(first: string, levels: readonly Level[]): string[] {
  return [`| ${first} | ${levels.map(levelName).join(' | ')} |`, `|---|${levels.map(() => '---:').join('|')}|`];
}

function throughputTable(runs: readonly TargetRun[], levels: readonly Level[]): string[] {
  const lines = header('configuration', levels);
  for (const run of runs) {
    if (run.error !== null)
      lines.push(
        `| ${run.label} | not run: ${short(run.error)} |${levels
          .slice(1)
          .map(() => ' |')
          .join('')}`,
      );
    else lines.push(`| ${run.label} | ${levels.map((l) => cellOf(run, l)).join(' | ')} |`);
  }
  return lines;
}

/** Over several rounds the requests/s ratio is the median of the rounds' own ratios, with their range. */
function ratio(run: TargetRun, base: TargetRun, level: Level, raw: readonly TargetRun[]): string {
  const a = run.levels.find((l) => l.level === level);
  const b = base.levels.find((l) => l.level === level);
  if (!measured(a) || !measured(b) || b.load.requestsPerSecond === 0) return '–';
  const p50 = a.load.p50Ms !== null && b.load.p50Ms ? a.load.p50Ms / b.load.p50Ms : null;
  const perRound = roundRatios(raw, run.target, base.target, level);
  const rate =
    perRound.length > 1
      ? `${fmtRatio(median(perRound))} (${Math.min(...perRound).toFixed(2)}–${Math.max(...perRound).toFixed(2)})`
      : fmtRatio(a.load.requestsPerSecond / b.load.requestsPerSecond);
  return `${rate} · ${fmtRatio(p50)}`;
}

/** Each robustrl configuration against each base (robustrl without recording, the SGLang gateway with the shim). */
function ratioTable(runs: readonly TargetRun[], levels: readonly Level[], raw: readonly TargetRun[]): string[] {
  const lines = header('configuration vs base (requests/s ratio · p50 ratio)', levels);
  for (const baseName of RATIO_BASES) {
    const base = runs.find((r) => r.target === baseName && r.error === null);
    if (!base) continue;
    for (const run of runs) {
      if (!run.target.startsWith('robustrl') || run === base || run.error !== null) continue;
      lines.push(`| ${run.target} vs ${base.target} | ${levels.map((l) => ratio(run, base, l, raw)).join(' | ')} |`);
    }
  }
  return lines.length > 2 ? lines : [];
}

function cpuTable(runs: readonly TargetRun[], levels: readonly Level[]): string[] {
  const lines = [`| configuration | level | ${CPU_ROLES.join(' | ')} | all |`, `|---|---|${CPU_ROLES.map(() => '---:').join('|')}|---:|`];
  for (const run of runs) {
    for (const level of levels) {
      const r = run.levels.find((l) => l.level === level);
      if (!measured(r)) continue;
      const cells = CPU_ROLES.map((role) => r.cpuMsPerRequest[role]);
      const all = cells.reduce<number>((s, x) => s + (x ?? 0), 0);
      lines.push(`| ${run.label} | ${levelName(level)} | ${cells.map((x) => (x === undefined ? '–' : fmtCpu(x))).join(' | ')} | ${fmtCpu(all)} |`);
    }
  }
  return lines.length > 2 ? lines : [];
}

function affinityTable(runs: readonly TargetRun[], levels: readonly Level[]): string[] {
  const lines = header('configuration', levels);
  for (const run of runs) {
    if (run.error !== null) continue;
    const cells = levels.map((level) => {
      const r = run.levels.find((l) => l.level === level);
      if (!measured(r) || r.affinity.multiTurnRequests === 0) return '–';
      return `${((100 * r.affinity.hits) / r.affinity.multiTurnRequests).toFixed(1)}%`;
    });
    lines.push(`| ${run.label} | ${cells.join(' | ')} |`);
  }
  return lines;
}

/** The report in markdown: per workload the throughput table, the ratios, CPU per request, and (multi-turn) the affinity hit rate. */
export function renderReport(runs: readonly TargetRun[], levels: readonly Level[], workloads: readonly Workload[], preamble: string[]): string {
  const out: string[] = [...preamble, ''];
  for (const workload of workloads) {
    const raw = runs.filter((r) => r.workload === workload);
    // Several rounds: every figure is the median over them (rounds.ts).
    const mine = mergeRounds(raw);
    const rounds = Math.max(1, ...mine.map((r) => r.rounds ?? 1));
    const over = rounds > 1 ? `, medians over ${rounds} rounds` : '';
    out.push(`### Workload \`${workload}\`: requests/s · p50 · p99 latency (ms)${over}`, '', ...throughputTable(mine, levels), '');
    const ratios = ratioTable(mine, levels, raw);
    if (ratios.length > 0)
      out.push(
        `Ratios (\`${workload}\`): above 1× req/s is faster, below 1× p50 is quicker${rounds > 1 ? "; req/s: the median of the rounds' ratios (their range)" : ''}`,
        '',
        ...ratios,
        '',
      );
    const cpu = cpuTable(mine, levels);
    if (cpu.length > 0)
      out.push(
        `CPU per request (ms, \`${workload}\`; – where the configuration has no such process; PostgreSQL: the run database's backends and the server's writers; Kafka broker: the whole, shared broker)`,
        '',
        ...cpu,
        '',
      );
    if (workload === 'multi-turn') {
      out.push('Prefix-cache affinity (`multi-turn`): turns sent to the engine that served the conversation so far', '', ...affinityTable(mine, levels), '');
    }
  }
  // Each distinct start once: ports are picked anew at each start, so they do not make it distinct.
  const shown = new Set<string>();
  const starts: string[] = [];
  for (const r of runs) {
    for (const l of r.launch) {
      const key = `${r.target} ${l.replace(/\d+/g, 'N')}`;
      if (!shown.has(key)) starts.push(`- ${r.target} (${r.workload}): \`${l}\``);
      shown.add(key);
    }
  }
  if (starts.length > 0) out.push('How each configuration was started:', '', ...starts, '');
  return out.join('\n');
}
