import { parseScenario, Scenario, ScenarioInput } from '../scenario';

/**
 * The paper's workloads (§7.1, Fig. 11): Qwen3-8B-Math, Qwen3-32B-Math and Qwen3-32B-SWE, each in sync,
 * semi-sync and async mode, 100 steps on 128 GPUs (16 machines × 8), a trainer fault at a random time
 * within every 10% of the steps. Where the paper gives a number it is cited next to it; where it does
 * not, the value is assumed and the reason given. `sources` carries the same notes into reports.
 */
type Workload = 'qwen3-8b-math' | 'qwen3-32b-math' | 'qwen3-32b-swe';
type Mode = 'sync' | 'semi-sync' | 'async';

const COMMON_SOURCES: Record<string, string> = {
  cluster:
    'paper §7.2: end-to-end runs on 128 GPUs; §7.1: 8 GPUs per machine, rollout TP 8 (a rollout is one machine), equal trainer and rollout GPUs in semi-sync and async (assumed equal in sync too: the paper does not give the sync split)',
  steps: 'paper §7.1: 100 steps',
  batch: 'paper §7.1: 64 prompts × 8 responses (global batch 512)',
  trainStartFraction: 'paper §7.1: semi-sync trains when 50% of the batch is done, sync at 100%, async at 0% with a one-step warm-up',
  'faults.trainerEveryStepsFraction': 'paper §7.1: a trainer fault at a random time within every 10% of the steps, by killing all trainers',
  'faults.rolloutFaultsPerMachineHour': 'paper §7.1 injects trainer faults only',
  'training.checkpointBlockingSeconds': 'paper §7.4, Fig. 19: about 3 s blocking per step (GPU to memory)',
  'training.weightLinkGBps': 'assumed: 50 GB/s per pull link; paper §7.4 moves 470 GB in about 6 s over the NICs of 32 machines',
  'restart.machineSchedulingSeconds': 'paper §7.3: machine scheduling 30 s (rollout replacement)',
  'restart.containerStartSeconds': 'paper §7.3: container startup under 30 s',
  'restart.engineStartSeconds': 'paper §7.3: inference engine startup 49 s (32B)',
  'restart.instanceRestartSeconds':
    'assumed: 150 s for Fig. 14\'s "restart instance" (container start, library installation; in place, no rescheduling) — the paper says a task restart takes over 300 s in total (§7.3)',
  detection: 'paper §4: 300 s trainer idle window, 60 s rollout silent window; a killed trainer process is an explicit signal (confirmed at once)',
  telemetrySeconds: 'assumed: agents report every 15 s (well inside the 60 s rollout window)',
};

const WORKLOADS: Record<
  Workload,
  {
    model: string;
    params: number;
    task: 'math' | 'swe';
    rollout: ScenarioInput['rollout'];
    training: { stepSeconds: number };
    restart: { checkpointLoadSeconds: number; workerInitSeconds: number; rolloutInitSeconds: number; trainerTeardownSeconds: number };
    sources: Record<string, string>;
  }
> = {
  'qwen3-8b-math': {
    model: 'Qwen3-8B',
    params: 8,
    task: 'math',
    rollout: { responseSeconds: { median: 40, sigma: 0.8, max: 360 }, turns: { min: 1, max: 1 }, toolSeconds: { median: 0, sigma: 0 }, tokensPerSecond: 60 },
    training: { stepSeconds: 90 },
    restart: { checkpointLoadSeconds: 30, workerInitSeconds: 60, rolloutInitSeconds: 90, trainerTeardownSeconds: 20 },
    sources: {
      'rollout.responseSeconds':
        'assumed: long-tailed (log-normal, median 40 s, tail capped at 360 s) so that 100 sync steps take about 12 h — the paper reports 0.8–2.1 h saved as 8.4–17.4%, i.e. runs of roughly 10 h (§7.2, abstract)',
      'rollout.turns': 'paper §7.1: math is single-turn with a rule-based reward',
      'training.stepSeconds': 'assumed: 90 s per step for 8B on 64 GPUs (a minute-scale step, §7.4: "each step takes over minutes")',
      'restart.checkpointLoadSeconds': 'assumed: 30 s from host memory (paper §7.3 loads shards to memory ahead)',
      'restart.workerInitSeconds': 'assumed: 60 s training-engine init (Fig. 14 stage; larger than checkpoint load)',
      'restart.rolloutInitSeconds': 'assumed: 90 s standalone inference-engine init in a task restart (Fig. 14 stage, absent in RobustRL)',
      'restart.trainerTeardownSeconds': "assumed: 20 s — RobustRL's trainer restart first destroys its process group and connections (§7.3)",
    },
  },
  'qwen3-32b-math': {
    model: 'Qwen3-32B',
    params: 32,
    task: 'math',
    rollout: { responseSeconds: { median: 70, sigma: 0.8, max: 600 }, turns: { min: 1, max: 1 }, toolSeconds: { median: 0, sigma: 0 }, tokensPerSecond: 35 },
    training: { stepSeconds: 240 },
    restart: { checkpointLoadSeconds: 60, workerInitSeconds: 120, rolloutInitSeconds: 120, trainerTeardownSeconds: 30 },
    sources: {
      'rollout.responseSeconds': 'assumed: a 32B model decodes slower (median 70 s, tail 600 s)',
      'rollout.turns': 'paper §7.1: math is single-turn',
      'training.stepSeconds': 'assumed: 240 s per step for 32B (4× the parameters of 8B on the same GPUs, minus better utilisation)',
      'restart.checkpointLoadSeconds': 'assumed: 60 s (4× the shards of 8B from memory)',
      'restart.workerInitSeconds': 'assumed: 120 s',
      'restart.rolloutInitSeconds': 'assumed: 120 s',
      'restart.trainerTeardownSeconds': 'assumed: 30 s',
    },
  },
  'qwen3-32b-swe': {
    model: 'Qwen3-32B',
    params: 32,
    task: 'swe',
    rollout: {
      responseSeconds: { median: 240, sigma: 0.7, max: 1050 },
      turns: { min: 4, max: 30 },
      toolSeconds: { median: 4, sigma: 0.8 },
      tokensPerSecond: 35,
    },
    training: { stepSeconds: 300 },
    restart: { checkpointLoadSeconds: 60, workerInitSeconds: 120, rolloutInitSeconds: 120, trainerTeardownSeconds: 30 },
    sources: {
      'rollout.responseSeconds': 'paper Fig. 15 (Qwen3-32B-SWE): output time tail at 1050 s; median assumed 240 s',
      'rollout.turns': 'paper §7.1 allows up to 50 tool turns; assumed 4–30 model turns per trajectory',
      'rollout.toolSeconds': 'assumed: SWE-bench sandbox calls of a few seconds (log-normal, median 4 s)',
      'training.stepSeconds': 'assumed: 300 s (longer sequences than math)',
      'restart.checkpointLoadSeconds': 'assumed: 60 s',
      'restart.workerInitSeconds': 'assumed: 120 s',
      'restart.rolloutInitSeconds': 'assumed: 120 s',
      'restart.trainerTeardownSeconds': 'assumed: 30 s',
    },
  },
};

function paperScenario(workload: Workload, mode: Mode): Scenario {
  const w = WORKLOADS[workload];
  const input: ScenarioInput = {
    name: `${workload}-${mode}`,
    description: `${w.model} ${w.task === 'math' ? 'DAPO-Math' : 'SWE-bench'} GRPO, ${mode}, 128 GPUs, 100 steps, a trainer fault within every 10% of the steps (paper §7.2)`,
    model: { name: w.model, parametersBillions: w.params },
    task: w.task,
    mode,
    cluster: { trainerMachines: 8, rolloutMachines: 8, gpusPerMachine: 8 },
    steps: 100,
    batch: { prompts: 64, responsesPerPrompt: 8 },
    rollout: w.rollout,
    training: { stepSeconds: w.training.stepSeconds, checkpointBlockingSeconds: 3, weightLinkGBps: 50, weightBuckets: 8 },
    restart: {
      machineSchedulingSeconds: 30,
      containerStartSeconds: 30,
      instanceRestartSeconds: 150,
      engineStartSeconds: 49,
      ...w.restart,
    },
    faults: { trainerEveryStepsFraction: 0.1, rolloutFaultsPerMachineHour: 0 },
    sources: { ...COMMON_SOURCES, ...w.sources },
  };
  return parseScenario(input, `built-in scenario ${input.name}`);
}

/** 256 GPUs (the paper's full testbed, §7.1: 32 machines), 100 steps: the simulator's speed benchmark. */
function scaleScenario(): Scenario {
  const base = paperScenario('qwen3-8b-math', 'semi-sync');
  return parseScenario(
    {
      ...base,
      name: 'qwen3-8b-math-semi-sync-256gpu',
      description: "Qwen3-8B-Math semi-sync on the paper's full 256-GPU testbed (32 machines), with rollout machine faults too — the benchmark scenario",
      cluster: { trainerMachines: 16, rolloutMachines: 16, gpusPerMachine: 8 },
      faults: { trainerEveryStepsFraction: 0.1, rolloutFaultsPerMachineHour: 0.02 },
      sources: {
        ...base.sources,
        cluster: 'paper §7.1: 32 machines × 8 H20 GPUs',
        'faults.rolloutFaultsPerMachineHour': 'assumed: 0.02 silent rollout machine failures per machine-hour, to exercise replacement at scale',
      },
    },
    'built-in scenario qwen3-8b-math-semi-sync-256gpu',
  );
}

/**
 * The 256-GPU benchmark job grown (or shrunk) to `gpus` GPUs, 8 a machine, half trainers and half
 * rollouts, with the batch grown with the rollouts (32 responses a rollout machine, as at 256 GPUs) so a
 * step takes about as long and every machine is as busy: the simulator's scaling benchmark
 * (jobs of 1,000–10,000 GPUs). Not a built-in scenario (`simulate --all` stays as it is).
 */
export function scaledScenario(gpus: number, steps = 100): Scenario {
  const base = scaleScenario();
  const machines = Math.max(2, Math.round(gpus / 8));
  const trainerMachines = Math.floor(machines / 2);
  const rolloutMachines = machines - trainerMachines;
  const responsesPerPrompt = base.batch.responsesPerPrompt;
  const responses = Math.round((base.batch.prompts * responsesPerPrompt * rolloutMachines) / base.cluster.rolloutMachines);
  return parseScenario(
    {
      ...base,
      name: `qwen3-8b-math-semi-sync-${machines * 8}gpu`,
      description: `${base.description.split(' on ')[0]} grown to ${machines * 8} GPUs (${machines} machines), ${responses} responses a step`,
      cluster: { trainerMachines, rolloutMachines, gpusPerMachine: 8 },
      steps,
      batch: { prompts: Math.max(1, Math.round(responses / responsesPerPrompt)), responsesPerPrompt },
      sources: {
        ...base.sources,
        cluster: `assumed: the 256-GPU testbed grown to ${machines} machines × 8 GPUs`,
        batch: 'assumed: the batch grows with the rollout machines (32 responses each, as at 256 GPUs)',
      },
    },
    `scaled scenario of ${gpus} GPUs`,
  );
}

/**
 * The main job's emulated cluster (`npm start`): the Qwen3-8B-Math semi-sync workload shrunk so it runs in
 * about a minute of scaled time — 6 machines, a 64-sample batch, a few steps — with both fault kinds.
 */
export function mainJobScenario(steps = 8): Scenario {
  const base = paperScenario('qwen3-8b-math', 'semi-sync');
  return parseScenario(
    {
      ...base,
      name: 'main-job',
      description: 'the npm start job: Qwen3-8B-Math semi-sync on 6 machines (48 GPUs), 64 samples per step, trainer faults and a rollout machine failure',
      cluster: { trainerMachines: 2, rolloutMachines: 4, gpusPerMachine: 8 },
      steps,
      batch: { prompts: 16, responsesPerPrompt: 4 },
      faults: { trainerEveryStepsFraction: 0.5, rolloutFaultsPerMachineHour: 0.3 },
      // In scaled time a probe's real round trip (bus, detector, agent) takes job time too: 10 s of job
      // time is under 0.1 s at 120x, which a busy machine can miss. 60 s keeps the probe honest.
      detection: { probeTimeoutSeconds: 60 },
      sources: {
        ...base.sources,
        cluster: 'assumed: small enough for one process and a minute of scaled time',
        batch: 'assumed: 16 prompts × 4 responses (the paper uses 64 × 8)',
        'faults.trainerEveryStepsFraction': 'assumed: a trainer fault within every half of the steps, so a short run shows two',
        'faults.rolloutFaultsPerMachineHour': 'assumed: 0.3 silent rollout failures per machine-hour, so a run usually shows a replacement',
        detection: 'paper §4 windows; the probe timeout is 60 s (ours is 10 s) because the main job runs in scaled time',
      },
    },
    'the main job scenario',
  );
}

const BUILT_IN: Array<() => Scenario> = [
  ...(['qwen3-8b-math', 'qwen3-32b-math', 'qwen3-32b-swe'] as const).flatMap((w) =>
    (['sync', 'semi-sync', 'async'] as const).map((m) => () => paperScenario(w, m)),
  ),
  scaleScenario,
  () => mainJobScenario(),
];

export function builtInScenarios(): Scenario[] {
  return BUILT_IN.map((f) => f());
}

export function builtInScenario(name: string): Scenario | undefined {
  return builtInScenarios().find((s) => s.name === name);
}
