import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { builtInScenario, builtInScenarios, parseScenario, renderCharts, Scenario, simulate, SimulationReport, STRATEGIES, Strategy } from '@robustrl/sim';

export interface SimulateArgs {
  scenario?: string;
  strategies?: string;
  seed?: string;
  json?: boolean;
  out?: string;
  list?: boolean;
  /** Every built-in paper scenario (not the 256-GPU benchmark one): the paper-reproduction table. */
  all?: boolean;
}

export interface SimulateIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** A usage error: printed with the command's help hint, exit code 2. */
export class UsageError extends Error {}

/**
 * `robustrl simulate`: runs a built-in scenario (by name) or a scenario file through the simulator for
 * each strategy and prints the comparison; `--json` prints the whole report, `--out DIR` also writes it
 * with the charts as SVG. Returns the report (null for --list).
 */
export async function runSimulateCommand(args: SimulateArgs, io: SimulateIo): Promise<SimulationReport | null> {
  if (args.list) {
    for (const s of builtInScenarios()) io.out(`${s.name.padEnd(34)} ${s.description}`);
    return null;
  }
  if (args.all) {
    if (args.scenario) throw new UsageError('--all runs every built-in scenario: leave out --scenario');
    await runAll(args, io);
    return null;
  }
  if (!args.scenario) throw new UsageError('--scenario <name|file.json> (or --all) is required (robustrl simulate --list shows the built-in ones)');
  const scenario = loadScenario(args.scenario);
  const strategies = parseStrategies(args.strategies);
  const seed = parseSeed(args.seed);
  const started = Date.now();
  const report = simulate(scenario, {
    seed,
    strategies,
    // Long runs show progress on stderr (stdout stays the table or the JSON).
    onProgress: (strategy, simulatedSeconds, steps) =>
      io.err(`  ${strategy}: ${(simulatedSeconds / 3600).toFixed(0)} h simulated, ${steps}/${scenario.steps} steps`),
  });
  io.err(`simulated ${scenario.name} (${strategies.join(', ')}, seed ${seed}) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (args.json) io.out(JSON.stringify(report, null, 2));
  else io.out(comparisonTable(report));
  if (args.out) {
    const dir = resolve(args.out);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${scenario.name}.json`), `${JSON.stringify(report, null, 2)}\n`);
    for (const chart of await renderCharts([report])) writeFileSync(join(dir, chart.file), chart.svg);
    io.err(`wrote ${scenario.name}.json and the charts to ${dir}`);
  }
  return report;
}

/** The paper's nine workloads × modes: one markdown table (docs/paper-reproduction.md) and the charts over all of them. */
async function runAll(args: SimulateArgs, io: SimulateIo): Promise<void> {
  const strategies = parseStrategies(args.strategies);
  const seed = parseSeed(args.seed);
  const scenarios = builtInScenarios().filter((s) => s.cluster.trainerMachines + s.cluster.rolloutMachines === 16);
  const reports: SimulationReport[] = [];
  for (const scenario of scenarios) {
    const started = Date.now();
    reports.push(simulate(scenario, { seed, strategies }));
    io.err(`  ${scenario.name}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
  if (args.json) io.out(JSON.stringify(reports, null, 2));
  else io.out(reproductionTable(reports));
  if (args.out) {
    const dir = resolve(args.out);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'all-scenarios.json'), `${JSON.stringify(reports, null, 2)}\n`);
    for (const chart of await renderCharts(reports)) writeFileSync(join(dir, chart.file), chart.svg);
    io.err(`wrote all-scenarios.json and the charts to ${dir}`);
  }
}

/** One row per scenario: end-to-end hours and ETTR per strategy, and robustrl's saving over task-restart. */
export function reproductionTable(reports: readonly SimulationReport[]): string {
  const strategies = reports[0]?.strategies.map((s) => s.strategy) ?? [];
  const head = ['scenario', ...strategies.map((s) => `${s} time`), ...strategies.map((s) => `${s} ETTR`), 'time saved', 'ETTR gain'];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const r of reports) {
    const c = r.comparison;
    lines.push(
      `| ${[
        r.scenario.name,
        ...r.strategies.map((s) => `${(s.wallClockSeconds / 3600).toFixed(2)} h`),
        ...r.strategies.map((s) => `${(s.ettr * 100).toFixed(1)} %`),
        c ? `${(c.timeSavedFraction * 100).toFixed(1)} %` : '-',
        c ? `${c.ettrGain >= 0 ? '+' : ''}${(c.ettrGain * 100).toFixed(1)} pt` : '-',
      ].join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

export function loadScenario(nameOrFile: string): Scenario {
  const builtIn = builtInScenario(nameOrFile);
  if (builtIn) return builtIn;
  if (!nameOrFile.endsWith('.json')) {
    throw new UsageError(`no built-in scenario '${nameOrFile}' (robustrl simulate --list shows them; a file must end in .json)`);
  }
  let raw: string;
  try {
    raw = readFileSync(nameOrFile, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read scenario file ${nameOrFile}: ${(e as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    throw new UsageError(`${nameOrFile} is not JSON: ${(e as Error).message}`);
  }
  try {
    return parseScenario(parsed, nameOrFile);
  } catch (e) {
    throw new UsageError(`${(e as Error).message}\n(the format is schemas/simulation/scenario.schema.json)`);
  }
}

function parseStrategies(list: string | undefined): Strategy[] {
  if (!list) return [...STRATEGIES];
  const names = list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = names.filter((n) => !(STRATEGIES as readonly string[]).includes(n));
  if (bad.length > 0 || names.length === 0)
    throw new UsageError(`unknown strategy ${bad.join(', ') || '(none)'}: expected a comma-separated list of ${STRATEGIES.join(', ')}`);
  return [...new Set(names)] as Strategy[];
}

function parseSeed(seed: string | undefined): number {
  if (seed === undefined) return 1;
  const n = Number(seed);
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new UsageError(`--seed must be an integer from 0 to 4294967295, got '${seed}'`);
  return n;
}

/** The comparison as a fixed-width table. */
export function comparisonTable(report: SimulationReport): string {
  const s = report.scenario;
  const head = `${s.name}: ${s.model} ${s.task}, ${s.mode}, ${s.gpus} GPUs, ${s.steps} steps, seed ${report.seed}`;
  const rows = [
    ['strategy', 'end-to-end', 'ETTR', 'faults', 'restarts', 'lost rollout', 'downtime (GPU-h)'],
    ...report.strategies.map((r) => [
      r.strategy,
      `${(r.wallClockSeconds / 3600).toFixed(2)} h`,
      `${(r.ettr * 100).toFixed(1)} %`,
      String(r.faults),
      String(r.restarts),
      `${(r.lostRolloutSeconds / 3600).toFixed(2)} machine-h`,
      r.downtimeByCategory
        .filter((c) => c.gpuHours > 0)
        .map((c) => `${c.category} ${c.gpuHours.toFixed(1)}`)
        .join(', ') || '-',
    ]),
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const lines = rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]))).join('  '));
  lines.splice(1, 0, widths.map((w, i) => '-'.repeat(i === widths.length - 1 ? Math.min(w, 40) : w)).join('  '));
  const c = report.comparison;
  const tail = c
    ? `robustrl vs task-restart: ${(c.timeSavedFraction * 100).toFixed(1)} % less end-to-end time, ETTR ${c.ettrGain >= 0 ? '+' : ''}${(c.ettrGain * 100).toFixed(1)} points`
    : '';
  return [head, '', ...lines, ...(tail ? ['', tail] : [])].join('\n');
}
