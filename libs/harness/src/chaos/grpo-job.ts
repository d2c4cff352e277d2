import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { MachineSpec } from '@robustrl/orchestrator';
import { SeededRandom } from '@robustrl/sim';
import { ChaosJob, ChaosJobContext, ObservedRun, ProcessSpec, readJobLedger } from './chaos-job';
import {
  activityMeasuredNotPushed,
  ettrAgrees,
  GrpoBatch,
  GrpoRecord,
  GrpoShape,
  passRateHolds,
  restartsResumeTheCheckpoint,
  samplesNeitherLostNorDuplicated,
  samplesWithinStaleness,
  stepsTrainedOnRecordedTrajectories,
  VersionReport,
  versionTagsHold,
} from './grpo-invariants';
import { Check, everyFaultEndedInRecoveryOrEscalation, noDuplicateRestartPerFault } from './system-invariants';

/**
 * The real job under the campaign: examples/grpo. Two trainer machines, one `robustrl_grpo trainer`
 * rank each (PyTorch, DDP over gloo, AdamW, distributed checkpoints), their group formed by the agents
 * (rank, world size and rank 0's host, first launch and every restart); rollout machines whose agents
 * start a vLLM engine and load every version they pull into it (ROBUSTRL_ENGINE_WEIGHTS=vllm); the
 * agent loops sending every sample through the router as token ids and completing it with its reward.
 * GPU activity is the processes' CPU time (the agent's process-cpu source), not a pushed constant.
 *
 * Everything Python runs in the environment deploy/local/vllm.sh makes (vLLM, torch, the example).
 */
const REPO_ROOT = resolve(__dirname, '..', '..', '..', '..');
const VLLM_SH = join(REPO_ROOT, 'deploy', 'local', 'vllm.sh');

export interface GrpoJobOptions {
  /** Prompts per step; each is sampled `groupSize` times. */
  prompts: number;
  groupSize: number;
  rollouts: number;
  /** Evaluate the greedy pass rate every this many steps (through the router). */
  evalEvery: number;
  /** The fault-free run's last pass rate with the same seed, when one was run. */
  baselinePassRate: number | null;
  /** How far the faulted run's last pass rate may be from the fault-free run's. */
  passRateTolerance: number;
  /** Samples whose log-probs are recomputed under their tagged version. */
  verifySamples: number;
}

export const DEFAULT_GRPO_JOB: GrpoJobOptions = {
  prompts: 16,
  groupSize: 8,
  rollouts: 2,
  evalEvery: 5,
  baselinePassRate: null,
  passRateTolerance: 0.1,
  verifySamples: 48,
};

const MAX_STALENESS = 1;
/** How far the control plane's ETTR may be from the one observed from the processes. */
const ETTR_TOLERANCE = 0.02;

export class GrpoJob implements ChaosJob {
  readonly name = 'grpo' as const;
  readonly trainers = 2;
  readonly rollouts: number;
  readonly batchSize: number;
  readonly faultWeights = { 'kill-engine-during-load': 2, 'kill-trainer-during-checkpoint': 2, 'stop-engine-during-load': 1 };
  readonly restartSeconds = 120;
  private python = '';
  private model = '';

  constructor(private readonly options: GrpoJobOptions = DEFAULT_GRPO_JOB) {
    this.rollouts = options.rollouts;
    this.batchSize = options.prompts * options.groupSize;
  }

  prepare(): void {
    const status = spawnSync('bash', [VLLM_SH, 'status'], { encoding: 'utf8' });
    if (status.status !== 0) throw new Error(`vLLM and torch are not installed: run 'bash deploy/local/vllm.sh ensure' first\n${status.stderr}`);
    [this.python, this.model] = status.stdout.trim().split('\n');
  }

  agentEnv(m: MachineSpec, ctx: ChaosJobContext): Record<string, string> {
    const host = ctx.hostAddress(m.machineId);
    const port = new URL(ctx.engineUrl(m.machineId)).port;
    return {
      ...this.jobEnv(ctx),
      ROBUSTRL_TRAINER_COMMAND: `exec ${this.python} -m robustrl_grpo trainer`,
      ROBUSTRL_ROLLOUT_COMMAND: `exec ${this.python} -m robustrl_grpo engine --host ${host} --port ${port}`,
      ROBUSTRL_ENGINE_WEIGHTS: 'vllm',
      ROBUSTRL_GPU_SOURCE: 'process-cpu',
      // Two cores for everything: one thread per process. (vLLM binds each engine's threads to the first
      // core: a replacement starting beside a busy engine took six minutes to load its model once; left
      // unbound they were slower still — docs/benchmarks.md, "The real job under faults".)
      OMP_NUM_THREADS: '1',
      ...(ctx.netns ? { GLOO_SOCKET_IFNAME: 'eth0', VLLM_HOST_IP: host } : {}),
    };
  }

  loops(ctx: ChaosJobContext): ProcessSpec {
    return { command: this.python, args: ['-m', 'robustrl_grpo', 'agent-loops'], env: { ...this.jobEnv(ctx), OMP_NUM_THREADS: '1' } };
  }

  committed(ctx: ChaosJobContext): number {
    return Math.max(0, ...readGrpoLedger(ctx.stateDir).flatMap((r) => (r.kind === 'checkpoint' ? [r.step ?? 0] : [])));
  }

  async checks(ctx: ChaosJobContext, run: ObservedRun): Promise<Check[]> {
    const shape: GrpoShape = { steps: ctx.steps, batchSize: this.batchSize, maxStaleness: MAX_STALENESS, ranks: this.trainers };
    const ledger = readGrpoLedger(ctx.stateDir);
    const batches = grpoBatches(run);
    const trainerIds = Array.from({ length: this.trainers }, (_, i) => `trainer-${i}`);
    return [
      stepsTrainedOnRecordedTrajectories(shape, ledger, batches),
      samplesNeitherLostNorDuplicated(shape, ledger, batches),
      restartsResumeTheCheckpoint(ledger),
      samplesWithinStaleness(shape, batches, ledger),
      versionTagsHold(this.verifyVersions(ctx, batches)),
      activityMeasuredNotPushed(run.events, trainerIds),
      passRateHolds(ledger, this.options.baselinePassRate, this.options.passRateTolerance),
      ettrAgrees(run.reportedEttr, run.observedEttr, ETTR_TOLERANCE),
      noDuplicateRestartPerFault(run),
      everyFaultEndedInRecoveryOrEscalation(run),
    ];
  }

  summary(ctx: ChaosJobContext): string {
    const evals = readGrpoLedger(ctx.stateDir).filter((r) => r.kind === 'eval');
    return `GRPO (examples/grpo): greedy pass rate ${evals.map((e) => `step ${e.step}: ${(e.passRate ?? 0).toFixed(2)}`).join(', ') || 'not evaluated'}`;
  }

  retrainedSteps(ctx: ChaosJobContext): number {
    const ledger = readGrpoLedger(ctx.stateDir);
    const commits = ledger.filter((r) => r.kind === 'checkpoint' && !r.recovered).length;
    return Math.max(0, ledger.filter((r) => r.kind === 'trained').length - commits * this.trainers) / this.trainers;
  }

  evaluations(ctx: ChaosJobContext): Array<[number, number]> {
    const last = new Map<number, number>();
    for (const r of readGrpoLedger(ctx.stateDir)) if (r.kind === 'eval' && typeof r.passRate === 'number') last.set(r.step ?? 0, r.passRate);
    return [...last].sort((a, b) => a[0] - b[0]);
  }

  private jobEnv(ctx: ChaosJobContext): Record<string, string> {
    return {
      ROBUSTRL_GRPO_STATE_DIR: ctx.stateDir,
      ROBUSTRL_GRPO_MODEL_DIR: this.model,
      ROBUSTRL_GRPO_STEPS: String(ctx.steps),
      ROBUSTRL_GRPO_SEED: String(ctx.seed),
      ROBUSTRL_GRPO_PROMPTS_PER_STEP: String(this.options.prompts),
      ROBUSTRL_GRPO_GROUP_SIZE: String(this.options.groupSize),
      ROBUSTRL_GRPO_MAX_STALENESS: String(MAX_STALENESS),
      ROBUSTRL_GRPO_EVAL_EVERY: String(this.options.evalEvery),
      ROBUSTRL_GRPO_BATCHES: 'robustrl',
      ROBUSTRL_GRPO_PUBLISH: 'agent',
      // Every version's checkpoint stays: the campaign recomputes log-probs under any of them.
      ROBUSTRL_GRPO_KEEP_CHECKPOINTS: '0',
      ROBUSTRL_GRPO_JOB_ID: ctx.jobId,
      ROBUSTRL_GRPO_ROUTER_URL: ctx.routerUrl,
      ROBUSTRL_GRPO_REQUEST_MANAGER_URL: ctx.requestManagerUrl,
      PYTHONUNBUFFERED: '1',
      PYTHONDONTWRITEBYTECODE: '1',
    };
  }

  /** A seeded sample of the batches' training samples, recomputed by the job's own code (verify.py). */
  private verifyVersions(ctx: ChaosJobContext, batches: GrpoBatch[]): VersionReport | { error: string } {
    const all = batches.flatMap((b) => b.completed.flatMap((t) => (t.sample ? [{ trajectoryId: t.trajectoryId, ...t.sample }] : [])));
    const rng = new SeededRandom(ctx.seed);
    const chosen = all
      .map((s) => ({ s, key: rng.next() }))
      .sort((a, b) => a.key - b.key)
      .slice(0, this.options.verifySamples)
      .map((x) => x.s);
    const file = join(ctx.logDir, 'verify-samples.json');
    writeFileSync(file, JSON.stringify(chosen));
    const run = spawnSync(this.python, ['-m', 'robustrl_grpo', 'verify-versions', file], {
      encoding: 'utf8',
      env: { ...process.env, ...this.jobEnv(ctx), OMP_NUM_THREADS: '2' },
      timeout: 600_000,
    });
    const line = run.stdout?.trim().split('\n').pop() ?? '';
    try {
      return JSON.parse(line) as VersionReport;
    } catch {
      return { error: `verify-versions exited ${run.status ?? run.signal}: ${(run.stderr ?? '').slice(-800)}` };
    }
  }
}

export function readGrpoLedger(stateDir: string): GrpoRecord[] {
  return readJobLedger<GrpoRecord>(stateDir);
}

/** Each step's completed trajectories with their training samples, as the request manager gave them. */
function grpoBatches(run: ObservedRun): GrpoBatch[] {
  const out: GrpoBatch[] = [];
  for (const b of run.batches) {
    const samples = new Map(b.samples?.map((s) => [s.trajectoryId, s.sample]) ?? []);
    out.push({
      step: b.step,
      total: b.total,
      completed: b.completed.map((t) => ({
        trajectoryId: t.trajectoryId,
        promptId: t.promptId,
        sampleIndex: t.sampleIndex,
        sample: samples.get(t.trajectoryId) ?? null,
      })),
    });
  }
  return out;
}
