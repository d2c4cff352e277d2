/**
 * `npm run bench:sim` — how fast the simulator runs a job, against the job itself.
 *
 *   node bench/dist/sim.bench.js [--repeats R] [--scenario NAME] [--scale-steps S] [--scale-max-gpus G]
 *
 * Runs the 256-GPU, 100-step scenario (`qwen3-8b-math-semi-sync-256gpu`: 32 machines, trainer faults every
 * 10% of the steps, rollout machine faults) for all three strategies, R times, and reports per strategy the
 * wall time of the simulation beside the simulated job's own end-to-end time: the ratio is the speed-up
 * over running the job (the baseline the simulator replaces). Also the messages decided on per second.
 * Progress on stderr, the table (markdown) on stdout.
 *
 * Then the scaling table (jobs of 1,000–10,000 GPUs): the same job grown to 1,000 / 2,500 /
 * 5,000 / 10,000 GPUs (`scaledScenario`: 8 GPUs a machine, the batch grown with the rollouts) for S
 * steps (default 100), role-based recovery once each, with the wall time and the cost per GPU·step —
 * flat when the simulator's cost is linear in the job's size. `--scale-max-gpus G` stops after the
 * sizes up to G (0: no scaling table).
 */
import { performance } from 'node:perf_hooks';
import { builtInScenario, runStrategy, scaledScenario, STRATEGIES } from '@robustrl/sim';
import { median, parseIntegerOptions } from './bench-kit';

const args = process.argv.slice(2);
const scenarioName = args.includes('--scenario') ? args[args.indexOf('--scenario') + 1] : 'qwen3-8b-math-semi-sync-256gpu';
const {
  repeats,
  'scale-steps': scaleSteps,
  'scale-max-gpus': scaleMaxGpus,
} = parseIntegerOptions(
  args.filter((a, i) => a !== '--scenario' && args[i - 1] !== '--scenario'),
  process.env,
  'bench/dist/sim.bench.js',
  {
    repeats: { env: 'BENCH_REPEATS', fallback: 3, min: 1, placeholder: 'R' },
    'scale-steps': { env: 'BENCH_SCALE_STEPS', fallback: 100, min: 1, placeholder: 'S' },
    'scale-max-gpus': { env: 'BENCH_SCALE_MAX_GPUS', fallback: 10_000, min: 0, placeholder: 'G' },
  },
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

const SCALES = [1000, 2500, 5000, 10_000].filter((g) => g <= scaleMaxGpus);
if (SCALES.length > 0) {
  const scaleRows: string[] = [];
  for (const target of SCALES) {
    const grown = scaledScenario(target, scaleSteps);
    const gpus = (grown.cluster.trainerMachines + grown.cluster.rolloutMachines) * grown.cluster.gpusPerMachine;
    let count = 0;
    const t0 = performance.now();
    const result = runStrategy(grown, 'robustrl', 1, { onMessage: () => count++ });
    const wall = (performance.now() - t0) / 1000;
    const usPerGpuStep = (wall * 1e6) / (gpus * grown.steps);
    process.stderr.write(`${grown.name} × ${grown.steps} steps: ${wall.toFixed(1)} s, ${count} messages\n`);
    scaleRows.push(
      `| ${gpus.toLocaleString('en-US')} | ${(grown.cluster.trainerMachines + grown.cluster.rolloutMachines).toLocaleString('en-US')} | ${(grown.batch.prompts * grown.batch.responsesPerPrompt).toLocaleString('en-US')} | ${(result.wallClockSeconds / 3600).toFixed(2)} h | ${wall.toFixed(1)} s | ${usPerGpuStep.toFixed(0)} | ${count.toLocaleString('en-US')} | ${Math.round(count / wall).toLocaleString('en-US')} |`,
    );
  }
  process.stdout.write(
    [
      `Simulator scaling: the 256-GPU job grown (8 GPUs a machine, batch grown with the rollouts), ${scaleSteps} steps, role-based recovery, one run each`,
      '',
      '| GPUs | machines | responses / step | simulated job | simulation wall time | µs per GPU·step | messages | messages/s |',
      '|---|---|---|---|---|---|---|---|',
      ...scaleRows,
      '',
    ].join('\n'),
  );
}
