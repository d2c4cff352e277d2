import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MachineSpec } from '@robustrl/orchestrator';
import type { RobustrlMessage } from '@robustrl/contracts';
import type { FaultKind } from './fault-schedule';
import type { ObservedEttr } from './observed-ettr';
import type { Check, RoleRestart, StoredBatch } from './system-invariants';

/**
 * The job a whole-system chaos campaign runs under robustrl (system-chaos.ts): which machines it has,
 * what their agents start, its agent loops, how far it got, and the invariants only it can be held to.
 * Two exist: `reference` (reference-job.ts, the stand-in of clients/python: fast, trains nothing) and
 * `grpo` (grpo-job.ts, examples/grpo: PyTorch GRPO on two gloo ranks, vLLM engines loading every
 * version the agents move).
 */
export interface ChaosJobContext {
  jobId: string;
  seed: number;
  steps: number;
  /** The job's own record and checkpoints (shared by every machine: hosts share the file system). */
  stateDir: string;
  logDir: string;
  /** The control plane as machines and the agent loops reach it. */
  requestManagerUrl: string;
  routerUrl: string;
  /** Where a machine's engine listens, as the router reaches it. */
  engineUrl(machineId: string): string;
  /** The address `machineId`'s processes bind and advertise (127.0.0.1 when machines share a host). */
  hostAddress(machineId: string): string;
  /** Whether machines are network namespaces of their own (their interface is `eth0`). */
  netns: boolean;
}

export interface ProcessSpec {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** What the campaign observed, for the job's own checks. */
export interface ObservedRun {
  events: RobustrlMessage[];
  batches: StoredBatch[];
  roleRestarts: RoleRestart[];
  published: Array<{ version: number; at: number }>;
  jobSeconds: number;
  /** The control plane's ETTR for the job (its projection), null when it could not be read. */
  reportedEttr: number | null;
  /** The ETTR observed from the processes themselves (observed-ettr.ts). */
  observedEttr: ObservedEttr | null;
}

export interface ChaosJob {
  readonly name: 'reference' | 'grpo';
  readonly trainers: number;
  readonly rollouts: number;
  /** Trajectories per step (the request manager's batch). */
  readonly batchSize: number;
  /** Fault weights of the kinds this job supports beyond the default mix (fault-schedule.ts). */
  readonly faultWeights: Partial<Record<FaultKind, number>>;
  /** Seconds a role needs to come back, for the settle and finish timeouts (a vLLM engine: tens). */
  readonly restartSeconds: number;
  /** Checks the environment before anything starts (installed engines, the model): throws with what to run. */
  prepare(): void;
  /** The job's part of a machine agent's environment: role commands and the framework's settings. */
  agentEnv(m: MachineSpec, ctx: ChaosJobContext): Record<string, string>;
  /** The agent loops: every step's trajectories through the router. */
  loops(ctx: ChaosJobContext): ProcessSpec;
  /**
   * Raises the running job's step count (its processes read it at each step boundary; step-target.ts
   * says when it is safe). Absent where the count is fixed at launch.
   */
  raiseSteps?(ctx: ChaosJobContext, steps: number): void;
  /** The newest step the job committed (its checkpoint), from its own record. */
  committed(ctx: ChaosJobContext): number;
  /** The invariants of the run, on what it left. */
  checks(ctx: ChaosJobContext, run: ObservedRun): Promise<Check[]>;
  /** One line on the job for the scorecard (e.g. the last evaluation). */
  summary(ctx: ChaosJobContext): string;
  /** Steps trained again after a fault (per rank-step retrained, divided by the ranks), from the job's record. */
  retrainedSteps(ctx: ChaosJobContext): number;
  /** [step, greedy pass rate] of the job's evaluations; empty for a job that evaluates nothing. */
  evaluations(ctx: ChaosJobContext): Array<[number, number]>;
}

export function machinesOf(job: Pick<ChaosJob, 'trainers' | 'rollouts'>): MachineSpec[] {
  return [
    ...Array.from({ length: job.trainers }, (_, i) => ({ machineId: `trainer-${i}`, role: 'trainer' as const, zone: 'az-1', hardwareClass: 'cpu-chaos' })),
    ...Array.from({ length: job.rollouts }, (_, i) => ({ machineId: `rollout-${i}`, role: 'rollout' as const, zone: 'az-1', hardwareClass: 'cpu-chaos' })),
  ];
}

/** The job's own record (`<state dir>/ledger.jsonl`), one object per line; a line torn by a kill -9 mid-write is skipped. */
export function readJobLedger<T>(stateDir: string): T[] {
  const path = join(stateDir, 'ledger.jsonl');
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as T];
      } catch {
        return [];
      }
    });
}
