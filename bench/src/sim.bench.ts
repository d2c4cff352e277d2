/**
 * `npm run bench:sim` — how fast the simulator runs a job, against the job itself.
 *
 *   node bench/dist/sim.bench.js [--repeats R] [--scenario NAME]
 *
 * Runs the 256-GPU, 100-step scenario (`qwen3-8b-math-semi-sync-256gpu`: 32 machines, trainer faults every
 * 10% of the steps, rollout machine faults) for all three strategies, R times, and reports per strategy the
 * wall time of the simulation beside the simulated job's own end-to-end time: the ratio is the speed-up
 * over running the job (the baseline the simulator replaces). Also the messages decided on per second.
 * Progress on stderr, the table (markdown) on stdout.
 */
import { performance } from 'node:perf_hooks';
import { builtInScenario, runStrategy, STRATEGIES } from '@robustrl/sim';
import { median, parseIntegerOptions } from './bench-kit';

const args = process.argv.slice(2);
const scenarioName = args.includes('--scenario') ? args[args.indexOf('--scenario') + 1] : 'qwen3-8b-math-semi-sync-256gpu';
const { repeats } = parseIntegerOptions(
  args.filter((a, i) => a !== '--scenario' && args[i - 1] !== '--scenario'),
  process.env,
  'bench/dist/sim.bench.js',
  { repeats: { env: 'BENCH_REPEATS', fallback: 3, min: 1, placeholder: 'R' } },
);
const scenario = builtInScenario(scenarioName);
if (!scenario) {
  process.stderr.write(`no built-in scenario '${scenarioName}' (robustrl simulate --list)\n`);
  process.exit(2);
}

const rows: string[] = [];
let totalWall = 0;
for (const strategy of STRATEGIES) {
  const walls: number[] = [];
  let simulated = 0;
  let messages = 0;
  for (let r = 0; r < repeats; r++) {
    let count = 0;
    const t0 = performance.now();
    const result = runStrategy(scenario, strategy, 1, { onMessage: () => count++ });
    const wall = (performance.now() - t0) / 1000;
    walls.push(wall);
    simulated = result.wallClockSeconds;
    messages = count;
    process.stderr.write(`${strategy} run ${r + 1}/${repeats}: ${wall.toFixed(2)} s for ${(simulated / 3600).toFixed(2)} simulated hours, ${count} messages\n`);
  }
  const wall = median(walls);
  totalWall += wall;
  rows.push(
    `| ${strategy} | ${(simulated / 3600).toFixed(2)} h | ${wall.toFixed(2)} s | ${Math.round(simulated / wall).toLocaleString('en-US')}x | ${Math.round(messages / wall).toLocaleString('en-US')} |`,
  );
}
const gpus = (scenario.cluster.trainerMachines + scenario.cluster.rolloutMachines) * scenario.cluster.gpusPerMachine;
process.stdout.write(
  [
    `Simulator speed: ${scenario.name} (${gpus} GPUs, ${scenario.steps} steps), median of ${repeats} runs, Node ${process.version}`,
    '',
    '| strategy | simulated job | simulation wall time | speed-up vs. running the job | messages/s |',
    '|---|---|---|---|---|',
    ...rows,
    '',
    `All three strategies: ${totalWall.toFixed(1)} s.`,
    '',
  ].join('\n'),
);
