// Charts of a simulation run, as SVG files.
//
// Each chart is a Vega-Lite spec (`chartSpecs`, checkable without rendering), compiled to Vega and
// rendered headless by Vega's SVG string renderer (`renderCharts`): no browser, no canvas, no
// hand-drawn SVG, and Vega escapes every text it writes.
//
// Why Vega 5 / Vega-Lite 5 (pinned exactly in the root package.json): Vega 6 and Vega-Lite 6 ship
// ESM only, and this monorepo compiles to CommonJS (tsc, jest with swc), where `require('vega')`
// of an ESM-only package fails on Node 20. The 5.x lines ship CommonJS builds (`build/vega-node.js`,
// `build/vega-lite.js`) and need nothing but the npm registry to install: with `renderer: 'none'`
// and `view.toSVG()` Vega never touches the optional native `canvas` package (without it, text
// widths are estimated from the font size, which is also what keeps the layout deterministic).
//
// Determinism: fixed sizes, inline data in the reports' order, no timestamps, and the SVG def ids
// (clip paths, gradients: a module-wide counter in Vega) are reset before each render, so the same
// reports give byte-identical SVG. Renders run one after another for that reason.
import type { TopLevelSpec } from 'vega-lite';
import type { RestartStageSeconds, SimulationReport, Strategy, StrategyResult } from './report-types';

export interface ChartFile {
  /** File name only (no directory), e.g. `end-to-end-time.svg`. */
  file: string;
  title: string;
  svg: string;
}

export interface ChartSpec {
  file: string;
  title: string;
  spec: TopLevelSpec;
}

const SCHEMA = 'https://vega.github.io/schema/vega-lite/v5.json';
const WIDTH = 640;
const HEIGHT = 300;
/** Height per bar of the restart breakdown: its bar count grows with scenarios × strategies × kinds. */
const BREAKDOWN_BAR_STEP = 22;

/** One color per strategy, the same in every chart (domain/range are given only for strategies present). */
const STRATEGY_COLORS: Record<Strategy, string> = { none: '#9e9e9e', 'task-restart': '#e45756', robustrl: '#4c78a8' };
const FALLBACK_COLOR = '#72b7b2';
const STRATEGY_ORDER: readonly string[] = ['none', 'task-restart', 'robustrl'];

/** Restart stages in the order of the paper's Fig. 14 (the order of `RestartStageSeconds['stage']`). */
const RESTART_STAGES: ReadonlyArray<RestartStageSeconds['stage']> = [
  'teardown',
  'machine-scheduling',
  'container-start',
  'engine-start',
  'rollout-init',
  'checkpoint-load',
  'worker-init',
  'weight-sync',
];

/** Shared look: generic fonts (no font files to find), white background, titles on the left. */
const CONFIG = { font: 'sans-serif', background: 'white', title: { anchor: 'start', fontSize: 14 } } as const;

/** Renders every chart of `reports` to SVG (see `chartSpecs` for which). */
export async function renderCharts(reports: readonly SimulationReport[]): Promise<ChartFile[]> {
  const out: ChartFile[] = [];
  // One at a time: the SVG def-id counter reset in `renderSvg` is module-wide.
  for (const { file, title, spec } of chartSpecs(reports)) out.push({ file, title, svg: await renderSvg(spec) });
  return out;
}

/**
 * The Vega-Lite specs of the charts, in this order:
 * - `sliding-ettr-<scenario>.svg` per report: sliding ETTR over time, one line per strategy;
 * - `end-to-end-time.svg`: wall-clock hours per scenario, grouped by strategy;
 * - `restart-breakdown.svg`: mean seconds per restart, stacked by stage, one bar per
 *   (scenario, strategy, restart kind) that had restarts. Always produced: with no restarts at all
 *   it holds a "No restarts" note, so the file list does not depend on the faults drawn.
 * Scenario names are made unique (` #2`, ` #3`, … for repeats, e.g. several seeds of one scenario)
 * and file names keep only `[A-Za-z0-9._-]` (anything else becomes `-`).
 */
export function chartSpecs(reports: readonly SimulationReport[]): ChartSpec[] {
  const labels = uniqueNames(
    reports.map((r) => r.scenario.name),
    ' #',
  );
  const slidingFiles = uniqueNames(
    labels.map((l) => `sliding-ettr-${safeFileStem(l)}`),
    '-',
  ).map((stem) => `${stem}.svg`);
  return [...reports.map((r, i) => slidingEttrChart(r, labels[i], slidingFiles[i])), endToEndChart(reports, labels), restartBreakdownChart(reports, labels)];
}

/** Loaded on first use: Vega is about a hundred modules that a simulation drawing no chart never needs. */
function loadVega() {
  return { vega: require('vega') as typeof import('vega'), vegaLite: require('vega-lite') as typeof import('vega-lite') };
}

/** Vega-Lite → Vega → headless view → SVG string; the view is finalized even when rendering fails. */
async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const { vega, vegaLite } = loadVega();
  const compiled = vegaLite.compile(spec).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
  try {
    resetSvgDefIds(vega);
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/**
 * Restarts Vega's module-wide counters of SVG def ids (`clip1`, `gradient_0`, …), so a chart's ids
 * don't depend on what was rendered before it. Exported by vega 5 but missing from its typings.
 */
function resetSvgDefIds(vega: typeof import('vega')): void {
  (vega as unknown as { resetSVGDefIds: () => void }).resetSVGDefIds();
}

// ---- a) sliding ETTR per scenario ----

/** What every fixed-size chart starts with: schema, title, size, look and its data. */
function frame(title: string, values: object[]) {
  return { $schema: SCHEMA, title, width: WIDTH, height: HEIGHT, config: CONFIG, data: { values } };
}

function slidingEttrChart(report: SimulationReport, label: string, file: string): ChartSpec {
  const title = `${label}: sliding ETTR`;
  const strategies = report.strategies.map((s) => s.strategy);
  const values = report.strategies.flatMap((s) => s.slidingEttr.map((p) => ({ strategy: s.strategy, hours: p.atSeconds / 3600, ettr: p.ettr })));
  return {
    file,
    title,
    spec: {
      ...frame(title, values),
      mark: { type: 'line', interpolate: 'linear' },
      encoding: {
        x: { field: 'hours', type: 'quantitative', title: 'Hours since job start' },
        y: { field: 'ettr', type: 'quantitative', title: 'Sliding ETTR', scale: { domain: [0, 1] }, axis: { format: '%' } },
        color: strategyColor(strategies),
      },
    },
  };
}

// ---- b) end-to-end time ----

function endToEndChart(reports: readonly SimulationReport[], labels: readonly string[]): ChartSpec {
  const title = 'End-to-end time by scenario and strategy';
  const values = reports.flatMap((r, i) => r.strategies.map((s) => ({ scenario: labels[i], strategy: s.strategy, hours: s.wallClockSeconds / 3600 })));
  const strategies = reports.flatMap((r) => r.strategies.map((s) => s.strategy));
  return {
    file: 'end-to-end-time.svg',
    title,
    spec: {
      ...frame(title, values),
      mark: 'bar',
      encoding: {
        x: { field: 'scenario', type: 'nominal', title: 'Scenario', sort: [...labels], axis: { labelAngle: 0 } },
        xOffset: { field: 'strategy', type: 'nominal', sort: sortedStrategies(strategies) },
        y: { field: 'hours', type: 'quantitative', title: 'Wall-clock time (hours)' },
        color: strategyColor(strategies),
      },
    },
  };
}

// ---- c) restart breakdown (paper Fig. 14) ----

interface BreakdownRow {
  bar: string;
  stage: RestartStageSeconds['stage'];
  stageIndex: number;
  seconds: number;
}

function restartBreakdownChart(reports: readonly SimulationReport[], labels: readonly string[]): ChartSpec {
  const title = 'Restart time by stage (mean seconds per restart)';
  const file = 'restart-breakdown.svg';
  const rows = reports.flatMap((r, i) => r.strategies.flatMap((s) => breakdownRows(labels[i], s)));
  if (rows.length === 0) return { file, title, spec: noteSpec(title, 'No restarts in these runs') };
  const bars = [...new Set(rows.map((r) => r.bar))];
  return {
    file,
    title,
    spec: {
      $schema: SCHEMA,
      title,
      width: WIDTH,
      height: { step: BREAKDOWN_BAR_STEP },
      config: CONFIG,
      data: { values: rows },
      mark: 'bar',
      encoding: {
        // Labels are long (scenario · strategy · kind): don't let the default 180 px limit cut them.
        y: { field: 'bar', type: 'nominal', title: null, sort: bars, axis: { labelLimit: 480 } },
        x: { field: 'seconds', type: 'quantitative', title: 'Seconds per restart', stack: 'zero' },
        color: { field: 'stage', type: 'nominal', title: 'Stage', scale: { domain: [...RESTART_STAGES], scheme: 'tableau10' } },
        order: { field: 'stageIndex', type: 'quantitative' },
      },
    },
  };
}

/** One row per stage of each restart kind that happened; strategies without restarts give none. */
function breakdownRows(scenario: string, result: StrategyResult): BreakdownRow[] {
  return result.restartBreakdown
    .filter((k) => k.count > 0)
    .flatMap((k) =>
      k.stages.map((st) => ({
        bar: `${scenario} · ${result.strategy} · ${k.kind} (n=${k.count})`,
        stage: st.stage,
        stageIndex: stageIndex(st.stage),
        seconds: st.seconds,
      })),
    );
}

function stageIndex(stage: RestartStageSeconds['stage']): number {
  const i = RESTART_STAGES.indexOf(stage);
  return i < 0 ? RESTART_STAGES.length : i;
}

/** A chart with only a centred note, for a chart without data. */
function noteSpec(title: string, note: string): TopLevelSpec {
  return {
    $schema: SCHEMA,
    title,
    width: WIDTH,
    height: 60,
    config: { ...CONFIG, view: { stroke: null } },
    data: { values: [{ note }] },
    mark: { type: 'text', fontSize: 13, color: '#555' },
    encoding: { text: { field: 'note', type: 'nominal' } },
  };
}

// ---- shared helpers ----

/** Color by strategy with fixed colors, legend in the canonical strategy order. */
function strategyColor(strategies: readonly string[]) {
  const domain = sortedStrategies(strategies);
  return {
    field: 'strategy',
    type: 'nominal',
    title: 'Strategy',
    scale: { domain, range: domain.map((s) => STRATEGY_COLORS[s as Strategy] ?? FALLBACK_COLOR) },
  } as const;
}

/** Distinct strategies, known ones in the canonical order, unknown ones after them by name. */
function sortedStrategies(strategies: readonly string[]): string[] {
  const rank = (s: string) => (STRATEGY_ORDER.includes(s) ? STRATEGY_ORDER.indexOf(s) : STRATEGY_ORDER.length);
  return [...new Set(strategies)].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

/** Makes names unique by suffixing repeats: `a`, `a`, `a` → `a`, `a<sep>2`, `a<sep>3`. */
function uniqueNames(names: readonly string[], sep: string): string[] {
  const used = new Set<string>();
  return names.map((name) => {
    let candidate = name;
    for (let n = 2; used.has(candidate); n++) candidate = `${name}${sep}${n}`;
    used.add(candidate);
    return candidate;
  });
}

/** A file name part safe on every file system and in URLs. */
function safeFileStem(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^-+|-+$/g, '') || 'scenario';
}
