import { noSplitBrain } from './cluster-invariants';
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { MachineSpec } from '@robustrl/orchestrator';
import { ChaosJob, ChaosJobContext, ObservedRun, ProcessSpec, readJobLedger } from './chaos-job';
import { checkInvariants, JobShape, LedgerRecord } from './system-invariants';

/**
 * The stand-in job of clients/python/robustrl_reference.py, the campaign's fast variant: two trainer
 * ranks that hash trajectory ids and sleep (a TCP barrier for a collective, a constant activity pushed
 * to the agent), four engines that answer hash words tagged with the version their agent holds, and
 * agent loops making multi-turn tool-calling trajectories. It trains nothing; what it exercises is
 * robustrl's control story end to end, in minutes (grpo-job.ts is the real job).
 */
const JOB = { batchSize: 8, toolRounds: 2, maxStaleness: 1, trainSeconds: 1, tokensPerReply: 8, tokenSeconds: 0.01, toolSeconds: 0.05, concurrency: 4 };

const REPO_ROOT = resolve(__dirname, '..', '..', '..', '..');
const REFERENCE = join(REPO_ROOT, 'clients', 'python', 'robustrl_reference.py');

export function python(): string {
  return process.env.PYTHON ?? 'python3';
}

export class ReferenceJob implements ChaosJob {
  readonly name = 'reference' as const;
  readonly trainers = 2;
  readonly rollouts = 4;
  readonly batchSize = JOB.batchSize;
  readonly faultWeights = {};
  readonly restartSeconds = 10;

  prepare(): void {
    if (!existsSync(REFERENCE)) throw new Error(`${REFERENCE} is missing`);
  }

  agentEnv(_m: MachineSpec, ctx: ChaosJobContext): Record<string, string> {
    return {
      ROBUSTRL_TRAINER_COMMAND: `${python()} ${REFERENCE} trainer`,
      ROBUSTRL_ROLLOUT_COMMAND: `${python()} ${REFERENCE} engine`,
      // The reference trainer pushes a constant activity itself: the emulated source takes pushes.
      ROBUSTRL_GPU_SOURCE: 'emulated',
      ...this.env(ctx),
    };
  }

  loops(ctx: ChaosJobContext): ProcessSpec {
    return {
      command: python(),
      args: [REFERENCE, 'agent-loops'],
      env: { ...this.env(ctx), ROBUSTRL_JOB_ID: ctx.jobId, ROBUSTRL_REF_ROUTER_URL: ctx.routerUrl, ROBUSTRL_REQUEST_MANAGER_URL: ctx.requestManagerUrl },
    };
  }

  committed(ctx: ChaosJobContext): number {
    return Math.max(0, ...readLedger(ctx.stateDir).flatMap((r) => (r.kind === 'checkpoint' ? [r.step ?? 0] : [])));
  }

  /** `<state dir>/steps`, written whole (a rename): the reference job reads it at each step boundary. */
  raiseSteps(ctx: ChaosJobContext, steps: number): void {
    const file = join(ctx.stateDir, 'steps');
    writeFileSync(`${file}.tmp`, `${steps}\n`);
    renameSync(`${file}.tmp`, file);
  }

  async checks(ctx: ChaosJobContext, run: ObservedRun) {
    const job: JobShape = { steps: ctx.steps, batchSize: JOB.batchSize, toolRounds: JOB.toolRounds, maxStaleness: JOB.maxStaleness };
    const ledger = readLedger(ctx.stateDir);
    return [...checkInvariants({ job, ledger, ...run }), noSplitBrain(ledger)];
  }

  summary(): string {
    return 'the reference job (a stand-in: it trains nothing)';
  }

  retrainedSteps(ctx: ChaosJobContext): number {
    const ledger = readLedger(ctx.stateDir);
    const commits = ledger.filter((r) => r.kind === 'checkpoint').length;
    return Math.max(0, ledger.filter((r) => r.kind === 'trained').length - commits * this.trainers) / this.trainers;
  }

  evaluations(): Array<[number, number]> {
    return [];
  }

  private env(ctx: ChaosJobContext): Record<string, string> {
    return {
      ROBUSTRL_REF_STEPS: String(ctx.steps),
      ROBUSTRL_REF_BATCH_SIZE: String(JOB.batchSize),
      ROBUSTRL_REF_TOOL_ROUNDS: String(JOB.toolRounds),
      ROBUSTRL_REF_TOKENS_PER_REPLY: String(JOB.tokensPerReply),
      ROBUSTRL_REF_TOKEN_SECONDS: String(JOB.tokenSeconds),
      ROBUSTRL_REF_TOOL_SECONDS: String(JOB.toolSeconds),
      ROBUSTRL_REF_TRAIN_SECONDS: String(JOB.trainSeconds),
      ROBUSTRL_REF_MAX_STALENESS: String(JOB.maxStaleness),
      ROBUSTRL_REF_CONCURRENCY: String(JOB.concurrency),
      ROBUSTRL_REF_STATE_DIR: ctx.stateDir,
    };
  }
}

export function readLedger(stateDir: string): LedgerRecord[] {
  return readJobLedger<LedgerRecord>(stateDir);
}
