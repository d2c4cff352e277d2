/**
 * Retention of the trajectory store: after a training step completes, completed batches older than
 * `ROBUSTRL_TRAJECTORY_RETENTION_STEPS` steps are deleted (see TrajectoryStore.prune).
 *
 * Triggered by `TrainingStepCompleted`, not by a timer: the step is what the window is counted in, only
 * the trainer knows when one ended, and the message carries the job and step to prune for. Pruning is
 * idempotent, so a redelivered step (at-least-once bus) just deletes nothing the second time.
 */
export const DEFAULT_TRAJECTORY_RETENTION_STEPS = 2;

/** Steps to keep, or null when retention is off (`ROBUSTRL_TRAJECTORY_RETENTION_STEPS=off`). */
export function retentionStepsFromEnv(env: NodeJS.ProcessEnv = process.env): number | null {
  const raw = env.ROBUSTRL_TRAJECTORY_RETENTION_STEPS;
  if (raw === undefined || raw.trim() === '') return DEFAULT_TRAJECTORY_RETENTION_STEPS;
  if (raw.trim() === 'off') return null;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) {
    throw new Error(`ROBUSTRL_TRAJECTORY_RETENTION_STEPS must be an integer >= 1 or 'off', got '${raw}'`);
  }
  return n;
}
