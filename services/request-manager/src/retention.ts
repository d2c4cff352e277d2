import { custom } from '@robustrl/config';

/**
 * Retention of the trajectory store: after a training step completes, completed batches older than
 * `ROBUSTRL_TRAJECTORY_RETENTION_STEPS` steps are deleted (see TrajectoryStore.prune).
 *
 * Triggered by `TrainingStepCompleted`, not by a timer: the step is what the window is counted in, only
 * the trainer knows when one ended, and the message carries the job and step to prune for. Pruning is
 * idempotent, so a redelivered step (at-least-once bus) just deletes nothing the second time.
 */
export const DEFAULT_TRAJECTORY_RETENTION_STEPS = 2;

export const TRAJECTORY_RETENTION_STEPS = custom('ROBUSTRL_TRAJECTORY_RETENTION_STEPS', {
  owner: 'request-manager',
  meaning: 'after a training step completes, completed batches older than this many steps are deleted from the trajectory store',
  default: DEFAULT_TRAJECTORY_RETENTION_STEPS as number | null,
  accepted: "an integer >= 1 or 'off'",
  parse: (raw): number | null | undefined => (raw === 'off' ? null : /^\d+$/.test(raw) && Number(raw) >= 1 ? Number(raw) : undefined),
});

/** Steps to keep, or null when retention is off (`ROBUSTRL_TRAJECTORY_RETENTION_STEPS=off`). */
export function retentionStepsFromEnv(env: NodeJS.ProcessEnv = process.env): number | null {
  return TRAJECTORY_RETENTION_STEPS.read(env);
}
