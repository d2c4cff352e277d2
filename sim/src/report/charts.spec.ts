// Real Vega rendering (no mocks): the charts must come out as SVG, deterministic, for any report.
import { chartSpecs, renderCharts } from './charts';
import type { SimulationReport, StrategyResult } from './report-types';

function result(strategy: StrategyResult['strategy'], over: Partial<StrategyResult> = {}): StrategyResult {
  return {
    strategy,
    wallClockSeconds: 36_000,
    ettr: 0.9,
    faults: 2,
    restarts: 2,
    lostRolloutSeconds: 120,
    steps: 100,
    slidingEttr: [
      { atSeconds: 300, ettr: 1 },
      { atSeconds: 360, ettr: 0.8 },
      { atSeconds: 420, ettr: 0.55 },
      { atSeconds: 480, ettr: 0.9 },
    ],
    downtimeByCategory: [],
    downtimeLedger: [],
    recoveryStages: [],
    restartBreakdown: [],
    ...over,
  };
}

function report(name: string, strategies: StrategyResult[], mode: SimulationReport['scenario']['mode'] = 'sync'): SimulationReport {
  return {
    scenario: { name, model: 'qwen-7b', task: 'math', mode, gpus: 64, steps: 100 },
    seed: 7,
    strategies,
    comparison: null,
  };
}

const fixture: SimulationReport = report('qwen7b-sync', [
  result('task-restart', {
    wallClockSeconds: 45_000,
    restartBreakdown: [
      {
        kind: 'task-restart',
        count: 2,
        stages: [
          { stage: 'machine-scheduling', seconds: 60 },
          { stage: 'container-start', seconds: 90 },
          { stage: 'checkpoint-load', seconds: 240 },
          { stage: 'weight-sync', seconds: 30 },
        ],
      },
    ],
  }),
  result('robustrl', {
    wallClockSeconds: 38_000,
    restartBreakdown: [
      {
        kind: 'trainer-restart',
        count: 1,
        stages: [
          { stage: 'worker-init', seconds: 20 },
          { stage: 'weight-sync', seconds: 5 },
        ],
      },
      {
        kind: 'rollout-replacement',
        count: 1,
        stages: [
          { stage: 'engine-start', seconds: 40 },
          { stage: 'weight-sync', seconds: 3 },
        ],
      },
      // No restart of this kind: left out of the chart.
      { kind: 'task-restart', count: 0, stages: [] },
    ],
  }),
]);

/** The text nodes of an SVG (as Vega wrote them, escaped), so failures print labels rather than the whole SVG. */
function texts(svg: string): string[] {
  return [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
}

describe('renderCharts', () => {
  it('renders one sliding ETTR chart per report, the end-to-end time and the restart breakdown', async () => {
    const charts = await renderCharts([fixture]);
    expect(charts.map((c) => c.file)).toEqual(['sliding-ettr-qwen7b-sync.svg', 'end-to-end-time.svg', 'restart-breakdown.svg']);
    expect(charts[0].title).toBe('qwen7b-sync: sliding ETTR');
    for (const c of charts) {
      expect(c.svg.startsWith('<svg')).toBe(true);
      expect(texts(c.svg)).toContain(c.title);
    }

    // Sliding ETTR and end-to-end time: a legend entry per strategy that ran, and only those.
    for (const c of charts.slice(0, 2)) {
      expect(texts(c.svg)).toEqual(expect.arrayContaining(['Strategy', 'task-restart', 'robustrl']));
      expect(texts(c.svg)).not.toContain('none');
    }

    // Restart breakdown: a bar label per (scenario, strategy, kind) that restarted, stages in the legend.
    const breakdown = texts(charts[2].svg);
    expect(breakdown).toEqual(
      expect.arrayContaining([
        'qwen7b-sync · task-restart · task-restart (n=2)',
        'qwen7b-sync · robustrl · trainer-restart (n=1)',
        'qwen7b-sync · robustrl · rollout-replacement (n=1)',
        'machine-scheduling',
        'checkpoint-load',
      ]),
    );
    expect(breakdown.some((t) => t.includes('robustrl · task-restart'))).toBe(false);
  });

  it('gives byte-identical SVG for the same reports', async () => {
    const reports = [fixture, report('qwen7b-async', [result('none'), result('robustrl')], 'async')];
    const first = await renderCharts(reports);
    const second = await renderCharts(reports);
    expect(second.map((c) => c.svg)).toEqual(first.map((c) => c.svg));
  });

  it('renders reports with empty sliding series and no restarts without throwing', async () => {
    const empty = report('empty', [result('none', { slidingEttr: [], restarts: 0 }), result('robustrl', { slidingEttr: [], restarts: 0 })]);
    const charts = await renderCharts([empty]);
    expect(charts.map((c) => c.file)).toEqual(['sliding-ettr-empty.svg', 'end-to-end-time.svg', 'restart-breakdown.svg']);
    for (const c of charts) expect(c.svg.startsWith('<svg')).toBe(true);
    expect(texts(charts[2].svg)).toContain('No restarts in these runs');
  });

  it('renders an empty report list', async () => {
    const charts = await renderCharts([]);
    expect(charts.map((c) => c.file)).toEqual(['end-to-end-time.svg', 'restart-breakdown.svg']);
  });

  it('lets Vega escape scenario names and keeps file names safe and unique', async () => {
    const odd = report('a <b> & c', [result('robustrl')]);
    const charts = await renderCharts([odd, odd]);
    expect(charts.map((c) => c.file)).toEqual(['sliding-ettr-a-b-c.svg', 'sliding-ettr-a-b-c-2.svg', 'end-to-end-time.svg', 'restart-breakdown.svg']);
    expect(texts(charts[0].svg)).toContain('a &lt;b&gt; &amp; c: sliding ETTR');
    expect(charts[1].title).toBe('a <b> & c #2: sliding ETTR');
  });
});

describe('chartSpecs', () => {
  it('plots sliding ETTR as percent over hours, colored by strategy', () => {
    const [sliding] = chartSpecs([fixture]);
    const spec = sliding.spec as any;
    expect(spec.encoding.y.scale.domain).toEqual([0, 1]);
    expect(spec.encoding.y.axis.format).toBe('%');
    expect(spec.encoding.color.scale.domain).toEqual(['task-restart', 'robustrl']);
    expect(spec.data.values).toContainEqual({ strategy: 'robustrl', hours: 420 / 3600, ettr: 0.55 });
  });

  it('groups end-to-end hours by scenario and strategy', () => {
    const spec = chartSpecs([fixture])[1].spec as any;
    expect(spec.encoding.xOffset.field).toBe('strategy');
    expect(spec.data.values).toEqual([
      { scenario: 'qwen7b-sync', strategy: 'task-restart', hours: 12.5 },
      { scenario: 'qwen7b-sync', strategy: 'robustrl', hours: 38_000 / 3600 },
    ]);
  });

  it('stacks restart stages in the order of the paper, one bar per kind that restarted', () => {
    const spec = chartSpecs([fixture])[2].spec as any;
    expect(spec.encoding.y.sort).toEqual([
      'qwen7b-sync · task-restart · task-restart (n=2)',
      'qwen7b-sync · robustrl · trainer-restart (n=1)',
      'qwen7b-sync · robustrl · rollout-replacement (n=1)',
    ]);
    // A role-based trainer restart begins by tearing down its process group; a task restart has no such stage.
    expect(spec.encoding.color.scale.domain.slice(0, 2)).toEqual(['teardown', 'machine-scheduling']);
    expect(spec.encoding.order.field).toBe('stageIndex');
  });
});
