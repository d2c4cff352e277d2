/**
 * `npm run bench:sim-cold-start` — what loading the simulator costs before its first simulated event.
 *
 *   node bench/dist/sim-cold-start.bench.js [--repeats R]
 *
 * Starts R fresh Node processes. Each one loads `@robustrl/sim` from the build and runs the `main-job`
 * scenario until the first message is published, then reports: the modules loaded by then (CommonJS
 * `require.cache`, i.e. every file Node had to read and compile), the time to load the simulator, and
 * the time from process start to the first simulated event. Medians on stdout (a markdown table),
 * progress on stderr. The baseline beside it is a process that loads only `@robustrl/contracts` (the
 * floor any simulator needs: the message schemas).
 */
import { execFileSync } from 'node:child_process';
import { median, parseIntegerOptions } from './bench-kit';

interface ColdStart {
  modules: number;
  loadMs: number;
  firstEventMs: number;
}

/** Runs in the child: `node -e` with this source, so nothing of the parent's module graph is shared. */
const CHILD = `
const { performance } = require('node:perf_hooks');
const t0 = performance.now();
const target = process.argv[1];
const lib = require(target);
const loadMs = performance.now() - t0;
let firstEventMs = loadMs;
if (target === '@robustrl/sim') {
  const FIRST = Symbol('first event');
  try {
    lib.runStrategy(lib.builtInScenario('main-job'), 'robustrl', 1, {
      onMessage: () => { throw FIRST; },
    });
  } catch (err) {
    if (err !== FIRST) throw err;
  }
  firstEventMs = performance.now();
}
process.stdout.write(JSON.stringify({ modules: Object.keys(require.cache).length, loadMs, firstEventMs }));
`;

function measure(target: string): ColdStart {
  const out = execFileSync(process.execPath, ['-e', CHILD, target], { encoding: 'utf8', cwd: process.cwd() });
  return JSON.parse(out) as ColdStart;
}

const { repeats } = parseIntegerOptions(process.argv.slice(2), process.env, 'bench/dist/sim-cold-start.bench.js', {
  repeats: { env: 'BENCH_REPEATS', fallback: 7, min: 1, placeholder: 'R' },
});

const rows: string[] = [];
for (const [label, target] of [
  ['simulator (`@robustrl/sim`)', '@robustrl/sim'],
  ['baseline: contracts only (`@robustrl/contracts`)', '@robustrl/contracts'],
] as const) {
  const runs: ColdStart[] = [];
  for (let r = 0; r < repeats; r++) {
    const run = measure(target);
    runs.push(run);
    process.stderr.write(
      `${target} run ${r + 1}/${repeats}: ${run.modules} modules, loaded in ${run.loadMs.toFixed(0)} ms, first event at ${run.firstEventMs.toFixed(0)} ms\n`,
    );
  }
  const firstEvent = median(runs.map((r) => r.firstEventMs));
  rows.push(
    `| ${label} | ${median(runs.map((r) => r.modules))} | ${median(runs.map((r) => r.loadMs)).toFixed(0)} ms | ${target === '@robustrl/sim' ? `${firstEvent.toFixed(0)} ms` : '—'} |`,
  );
}
process.stdout.write(
  [
    `Simulator cold start, median of ${repeats} fresh processes, Node ${process.version}`,
    '',
    '| what is loaded | modules loaded | time to load | process start → first simulated event |',
    '|---|---|---|---|',
    ...rows,
    '',
  ].join('\n'),
);
