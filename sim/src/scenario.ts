import { z } from 'zod';

const seconds = z.number().nonnegative();
const positive = z.number().positive();

/**
 * A simulated RL job: what the simulator needs to know about a workload. Every duration is in seconds.
 * The JSON Schema in `schemas/simulation/scenario.schema.json` is generated from this (npm run schemas:generate).
 */
export const Scenario = z
  .object({
    name: z.string().min(1).describe('Short name, used for --scenario and file names'),
    description: z.string().default(''),
    model: z.object({ name: z.string().min(1), parametersBillions: positive.describe('weights are published as bf16: 2 bytes per parameter') }),
    task: z.enum(['math', 'swe']),
    mode: z.enum(['sync', 'semi-sync', 'async']),
    cluster: z.object({
      trainerMachines: z.int().positive(),
      rolloutMachines: z.int().positive(),
      gpusPerMachine: z.int().positive().default(8),
    }),
    steps: z.int().positive(),
    batch: z.object({ prompts: z.int().positive(), responsesPerPrompt: z.int().positive() }),
    /** Fraction of a batch that must be generated before training starts: sync 1, semi-sync 0.5 (paper §7.1), async 0 (one step off-policy). */
    trainStartFraction: z.number().min(0).max(1).optional(),
    rollout: z.object({
      /** Generation time of one whole response (all its turns), log-normal: median and shape. */
      responseSeconds: z.object({ median: positive, sigma: z.number().nonnegative(), max: positive }),
      /** Model turns per trajectory (1 for single-turn math; tool-using tasks take several). */
      turns: z.object({ min: z.int().positive(), max: z.int().positive() }),
      /** Sandbox latency of each tool call between turns, log-normal. */
      toolSeconds: z.object({ median: seconds, sigma: z.number().nonnegative() }),
      /** Generated tokens per second of one response (throughput samples and token counts). */
      tokensPerSecond: positive.default(40),
    }),
    training: z.object({
      /** Trainer time for one step on a whole batch (forward, backward, optimizer). */
      stepSeconds: positive,
      /** Blocking part of the per-step checkpoint (GPU to host memory, paper §7.4: about 3 s). */
      checkpointBlockingSeconds: seconds,
      /** Per-link bandwidth of a weight pull (bytes are bf16 weights, split in buckets). */
      weightLinkGBps: positive,
      weightBuckets: z.int().positive().default(8),
    }),
    restart: z.object({
      machineSchedulingSeconds: seconds.describe('a replacement machine is scheduled (paper §7.3: 30 s)'),
      containerStartSeconds: seconds.describe('container start of a replacement machine (paper §7.3: under 30 s)'),
      instanceRestartSeconds: seconds.describe(
        'in-place restart of every instance of a task: container restart and library installation (paper Fig. 14 "restart instance")',
      ),
      engineStartSeconds: seconds.describe('inference engine start of a rollout (paper §7.3: 49 s for 32B)'),
      rolloutInitSeconds: seconds.describe('rollout initialisation after the engine (task restart only)'),
      checkpointLoadSeconds: seconds,
      workerInitSeconds: seconds.describe('training engine initialisation'),
      trainerTeardownSeconds: seconds.describe('a role-based trainer restart first tears down its process group and connections'),
    }),
    faults: z.object({
      /** A trainer fault (all trainers killed) at a random time within every this fraction of the steps; null: none. Paper §7.1: 0.1. */
      trainerEveryStepsFraction: z.number().gt(0).max(1).nullable(),
      /** Silent rollout machine failures per machine-hour (exponential inter-arrival). */
      rolloutFaultsPerMachineHour: z.number().nonnegative(),
      /**
       * Of the trainer faults, the share that is a hardware failure (an XID error) of one trainer machine:
       * that machine must leave the group — a rollout lent as warm standby in semi-sync/async, a new
       * machine in sync (paper §5.1.3). The other ranks crash with it. 0: every trainer fault kills processes only.
       */
      trainerHardwareFraction: z.number().min(0).max(1).default(0),
      /**
       * Of the rollout faults, the share that is an engine process crash on a healthy machine (it exits
       * and the agent says so), restarted in place; the rest are silent machine failures, replaced.
       */
      rolloutProcessFraction: z.number().min(0).max(1).default(0),
      /**
       * The chance that a trainer fault strikes its step again once the restarted group trains it: a
       * reproducible fault, which paper §5.1.2 rule 2 escalates to a whole-task restart.
       */
      repeatInStepProbability: z.number().min(0).max(1).default(0),
    }),
    /** Detection windows (paper §4 defaults when absent), carried by the job's JobStarted like a real job. */
    detection: z
      .object({ trainerIdleWindowSeconds: positive.optional(), rolloutSilentWindowSeconds: positive.optional(), probeTimeoutSeconds: positive.optional() })
      .default({}),
    telemetrySeconds: positive.default(15).describe('agent telemetry period (throughput and GPU activity samples)'),
    ettr: z.object({ windowSeconds: positive.default(300), sampleSeconds: positive.default(60) }).default({ windowSeconds: 300, sampleSeconds: 60 }),
    /** Where each number comes from: parameter path → paper section/figure, or "assumed: <reason>". */
    sources: z.record(z.string(), z.string()).default({}),
  })
  .meta({ id: 'SimulationScenario', title: 'robustrl simulation scenario' });

export type Scenario = z.infer<typeof Scenario>;
export type ScenarioInput = z.input<typeof Scenario>;

/** Parses a scenario (a built-in one or a user's JSON file) with messages that say which field is wrong. */
export function parseScenario(input: unknown, origin = 'scenario'): Scenario {
  const r = Scenario.safeParse(input);
  if (!r.success) {
    const issues = r.error.issues.map((i) => `  ${i.path.join('.') || '(root)'}: ${i.message}`).join('\n');
    throw new Error(`${origin} is not a valid simulation scenario:\n${issues}`);
  }
  const s = r.data;
  if (s.rollout.turns.max < s.rollout.turns.min) throw new Error(`${origin}: rollout.turns.max must be at least rollout.turns.min`);
  if (s.rollout.responseSeconds.max < s.rollout.responseSeconds.median) throw new Error(`${origin}: rollout.responseSeconds.max must be at least the median`);
  return s;
}

/** Training starts when this fraction of the batch is done: 1 sync, 0.5 semi-sync (paper §7.1), 0 async. */
export function trainStartFraction(s: Scenario): number {
  return s.trainStartFraction ?? (s.mode === 'sync' ? 1 : s.mode === 'semi-sync' ? 0.5 : 0);
}

/** Where the scenario format's JSON Schema is checked in, relative to `schemas/`. */
export const SCENARIO_SCHEMA_FILE = 'simulation/scenario.schema.json';

export function renderScenarioSchema(): string {
  return `${JSON.stringify(z.toJSONSchema(Scenario, { io: 'input' }), null, 2)}\n`;
}
