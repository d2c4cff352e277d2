import type { ChaosJob } from './chaos-job';
import type { FaultKind } from './fault-schedule';

/** A whole-system campaign's options (system-chaos.ts; `npm run chaos` reads them from its flags). */
export interface SystemChaosOptions {
  seed: number;
  faults: number;
  steps: number;
  weights?: Partial<Record<FaultKind, number>>;
  /** The whole run's deadline (job and faults), seconds. */
  deadlineSeconds: number;
  /** Keep the run's folder (servers' data, every process's log) instead of removing it. */
  keep: boolean;
  progress: (line: string) => void;
  /** The job under the campaign (default: the reference stand-in). */
  job?: ChaosJob;
  /** `netns`: every machine a network namespace of its own (root only); `shared`: one host, one loopback. */
  hosts?: 'shared' | 'netns';
  /** The controller's recovery policy: role-based (default) or task-restart for every fault (paper §7's baseline). */
  policy?: 'role-based' | 'task-restart';
  /** The product's detection windows and command timeout divided by this (default DEFAULT_TIME_SCALE). */
  timeScale?: number;
  /** The share of faults injected on top of the previous one (fault-schedule.ts; default 0.25). */
  overlap?: number;
}

export const DEFAULT_SYSTEM_CHAOS: Omit<SystemChaosOptions, 'progress' | 'seed'> = {
  faults: 20,
  steps: 150,
  deadlineSeconds: 1800,
  keep: false,
};
