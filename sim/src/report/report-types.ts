import type { DowntimeCategory, DowntimeRow, SlidingPoint, StageStats } from '@robustrl/ettr';

/** The three ways a simulated job meets faults. */
export type Strategy = 'none' | 'task-restart' | 'robustrl';
export const STRATEGIES: readonly Strategy[] = ['none', 'task-restart', 'robustrl'];

/** What a restart restarted: the task, the trainer group, a rollout machine (replaced), a rollout's engine (in place), a rollout lent to the trainer. */
export type RestartKind = 'task-restart' | 'trainer-restart' | 'rollout-replacement' | 'engine-restart' | 'warm-standby';

/** Mean seconds of one restart stage (paper Fig. 14's stages). */
export interface RestartStageSeconds {
  stage: 'teardown' | 'machine-scheduling' | 'container-start' | 'engine-start' | 'rollout-init' | 'checkpoint-load' | 'worker-init' | 'weight-sync';
  seconds: number;
}

/** One strategy's run of a scenario. Every number comes from the events of that run. */
export interface StrategyResult {
  strategy: Strategy;
  /** End-to-end time of the job (all steps trained). */
  wallClockSeconds: number;
  ettr: number;
  /** Faults injected (and confirmed by the detector). */
  faults: number;
  /** Restart commands carried out: trainer group restarts, machine replacements, task restarts. */
  restarts: number;
  /** Rollout generation (GPU-seconds / GPUs per machine = machine-seconds) thrown away and redone. */
  lostRolloutSeconds: number;
  steps: number;
  /** Sliding ETTR (window from the scenario, default 5 minutes), sampled every minute. */
  slidingEttr: SlidingPoint[];
  downtimeByCategory: Array<{ category: DowntimeCategory; gpuHours: number }>;
  /** The ledger: GPU-hours lost per category, fault (outage) and machine. */
  downtimeLedger: DowntimeRow[];
  recoveryStages: StageStats[];
  /** Mean seconds per restart, per stage, by restart kind. */
  restartBreakdown: Array<{ kind: RestartKind; count: number; stages: RestartStageSeconds[] }>;
}

export interface SimulationReport {
  scenario: { name: string; model: string; task: string; mode: 'sync' | 'semi-sync' | 'async'; gpus: number; steps: number };
  seed: number;
  strategies: StrategyResult[];
  /** robustrl vs task-restart, when both ran. */
  comparison: { timeSavedFraction: number; ettrGain: number } | null;
}
