/**
 * How many steps a campaign's job runs (system-chaos.ts). The faults of a seeded schedule take what the
 * host gives them — a settle wait, a recovery — while the job goes on training, so on a fast host the
 * job could end before the last fault and the campaign would miss part of its mix. A job whose step
 * count can be raised while it runs (the reference job: `<state dir>/steps`) is lengthened a few steps
 * at a time, only while faults are still to come. Pure: the run's state in, the new count or null out.
 */

/** Steps added at a time; raised when no more than this many are left. */
export const RAISE_BY = 10;
/**
 * Fewer steps left than this and the count stays: every process of the job reads it at its step
 * boundaries, and all must read the same one (trainer ranks are at most a step apart, behind a barrier).
 */
export const LAST_SAFE_LEFT = 3;
/** Never beyond this multiple of the steps asked for: a job that cannot keep up is not run forever. */
export const MAX_RAISE_FACTOR = 3;

export interface StepTargetView {
  /** The newest step the job committed. */
  committed: number;
  /** Its step count now. */
  target: number;
  /** The step count the campaign was asked for. */
  asked: number;
  /** Scheduled faults not yet injected. */
  faultsLeft: number;
}

/** The raised step count, or null when it stays. */
export function raisedStepTarget(view: StepTargetView): number | null {
  if (view.faultsLeft <= 0) return null;
  const left = view.target - view.committed;
  if (left > RAISE_BY || left < LAST_SAFE_LEFT) return null;
  const next = Math.min(view.asked * MAX_RAISE_FACTOR, view.target + RAISE_BY);
  return next > view.target ? next : null;
}
