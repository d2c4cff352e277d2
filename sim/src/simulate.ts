import type { RobustrlMessage } from '@robustrl/contracts';
import { createControllerDecider, CONTROLLER_INPUT_TYPES } from '@robustrl/controller-domain';
import { createDetectorDecider, DETECTOR_INPUT_TYPES, PAPER_DETECTION_DEFAULTS } from '@robustrl/detector-domain';
import { createEttrProjection, downtimeLedger, ETTR_INPUT_TYPES, EttrInput, ettrReport, slidingEttr, viewAt } from '@robustrl/ettr';
import { createRolloutPoolDecider, ROLLOUT_POOL_INPUT_TYPES } from '@robustrl/rollout-manager-domain';
import { createWeightRegistryDecider, WEIGHT_REGISTRY_INPUT_TYPES } from '@robustrl/weight-registry-domain';
import { EmulatedCluster, RestartKind } from './cluster/emulated-cluster';
import { DeciderHost } from './kernel/decider-host';
import { SimKernel } from './kernel/sim-kernel';
import type { RestartStageSeconds, SimulationReport, Strategy, StrategyResult } from './report/report-types';
import { STRATEGIES } from './report/report-types';
import type { Scenario } from './scenario';

export interface SimulateOptions {
  strategies?: readonly Strategy[];
  seed?: number;
  /** Parse every message with the contracts' schemas (slower; the specs use it). */
  validateMessages?: boolean;
  /** Called with (strategy, simulated seconds, steps done) as a run goes (progress output). */
  onProgress?: (strategy: Strategy, simulatedSeconds: number, stepsDone: number) => void;
  /** Sees every message of every run (tests, `--events`). */
  onMessage?: (strategy: Strategy, message: RobustrlMessage) => void;
}

/** Detector and controller evaluate time-based rules this often (the services tick every second). */
const TICK_MS = 5_000;
/** A run that has not finished after this much virtual time is reported as stuck, not looped on. */
const MAX_VIRTUAL_MS = 90 * 24 * 3_600_000;

/**
 * Runs a scenario once per strategy with the same seed and compares them.
 *
 *  - `none`         the same job without faults (the fault-free baseline);
 *  - `task-restart` every fault restarts the whole task in place (ByteRobust-style baseline; the real
 *                   controller with its `task-restart` policy);
 *  - `robustrl`     role-based recovery: the real controller as deployed.
 *
 * In each run the real detector, controller, rollout-pool and weight-registry deciders make every
 * decision; the emulated cluster only produces what agents would report and carries out commands.
 */
export function simulate(scenario: Scenario, options: SimulateOptions = {}): SimulationReport {
  const seed = options.seed ?? 1;
  const strategies = options.strategies ?? STRATEGIES;
  const results = strategies.map((strategy) => runStrategy(scenario, strategy, seed, options));
  const byName = new Map(results.map((r) => [r.strategy, r]));
  const task = byName.get('task-restart');
  const robust = byName.get('robustrl');
  return {
    scenario: {
      name: scenario.name,
      model: scenario.model.name,
      task: scenario.task,
      mode: scenario.mode,
      gpus: (scenario.cluster.trainerMachines + scenario.cluster.rolloutMachines) * scenario.cluster.gpusPerMachine,
      steps: scenario.steps,
    },
    seed,
    strategies: results,
    comparison:
      task && robust
        ? { timeSavedFraction: round4((task.wallClockSeconds - robust.wallClockSeconds) / task.wallClockSeconds), ettrGain: round4(robust.ettr - task.ettr) }
        : null,
  };
}

export function runStrategy(scenario: Scenario, strategy: Strategy, seed: number, options: SimulateOptions = {}): StrategyResult {
  const kernel = new SimKernel(`sim-${scenario.name}-${strategy}`, { validate: options.validateMessages });
  const hosts = [
    new DeciderHost(kernel, 'detector', createDetectorDecider({ defaults: PAPER_DETECTION_DEFAULTS }), DETECTOR_INPUT_TYPES, TICK_MS),
    new DeciderHost(
      kernel,
      'controller',
      createControllerDecider({ policy: strategy === 'task-restart' ? 'task-restart' : 'role-based' }),
      CONTROLLER_INPUT_TYPES,
      TICK_MS,
    ),
    new DeciderHost(kernel, 'rollout-manager', createRolloutPoolDecider(), ROLLOUT_POOL_INPUT_TYPES, null),
    new DeciderHost(kernel, 'weight-registry', createWeightRegistryDecider(), WEIGHT_REGISTRY_INPUT_TYPES, null),
  ];
  const projection = createEttrProjection({ windowMs: scenario.ettr.windowSeconds * 1000, sampleMs: scenario.ettr.sampleSeconds * 1000 });
  let view = projection.initialView();
  kernel.subscribe(ETTR_INPUT_TYPES, (m) => {
    view = projection.evolve(view, m as EttrInput);
  });
  if (options.onMessage) kernel.subscribe(null, (m) => options.onMessage!(strategy, m));

  const cluster = new EmulatedCluster(kernel, scenario, seed, strategy !== 'none');
  for (const h of hosts) h.start();
  cluster.start();

  const start = kernel.now;
  let lastProgress = start;
  const finished = kernel.run(() => {
    if (options.onProgress && kernel.now - lastProgress >= 3_600_000) {
      lastProgress = kernel.now;
      options.onProgress(strategy, (kernel.now - start) / 1000, cluster.stepsDone);
    }
    return cluster.finishedAt !== null;
  }, start + MAX_VIRTUAL_MS);
  if (!finished) {
    throw new Error(
      `${scenario.name}/${strategy}: the job did not finish (${cluster.stepsDone}/${scenario.steps} steps after ${Math.round((kernel.now - start) / 3_600_000)} simulated hours); the scenario or the recovery is stuck`,
    );
  }
  // Account up to the end of the job (the last event may be earlier).
  const end = cluster.finishedAt!;
  view = viewAt(view, end);
  const report = ettrReport(view);
  const ledger = downtimeLedger(view);
  const lostGpuHours = report.downtimeByCategory.find((c) => c.category === 'lost-rollout')?.gpuHours ?? 0;
  return {
    strategy,
    wallClockSeconds: Math.round((end - start) / 1000),
    ettr: report.ettr,
    faults: cluster.faultsInjected,
    restarts: cluster.restarts.length,
    lostRolloutSeconds: Math.round((lostGpuHours * 3600) / scenario.cluster.gpusPerMachine),
    steps: cluster.stepsDone,
    slidingEttr: slidingEttr(view),
    downtimeByCategory: report.downtimeByCategory,
    downtimeLedger: ledger,
    recoveryStages: report.stages,
    restartBreakdown: restartBreakdown(cluster),
  };
}

function restartBreakdown(cluster: EmulatedCluster): StrategyResult['restartBreakdown'] {
  const kinds: RestartKind[] = ['task-restart', 'trainer-restart', 'warm-standby', 'rollout-replacement', 'engine-restart'];
  return kinds
    .map((kind) => {
      const rs = cluster.restarts.filter((r) => r.kind === kind);
      const stages = new Map<RestartStageSeconds['stage'], number>();
      for (const r of rs)
        for (const [stage, s] of Object.entries(r.stages))
          stages.set(stage as RestartStageSeconds['stage'], (stages.get(stage as RestartStageSeconds['stage']) ?? 0) + s);
      return { kind, count: rs.length, stages: [...stages.entries()].map(([stage, total]) => ({ stage, seconds: round4(total / Math.max(1, rs.length)) })) };
    })
    .filter((b) => b.count > 0);
}

function round4(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}
