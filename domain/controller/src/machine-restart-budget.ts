import type { DecisionRule } from '@robustrl/contracts';
import type { ControllerData, ControllerSettings } from './controller.state';

/**
 * The restart budget of a trainer machine (DESIGN §Recovery, paper §5.1.2). A fault restarts the
 * trainer in place, and a second in the same step restarts the task (rule 2); but a machine whose trainer
 * fails on every restart would loop through those forever — each task restart opens a first iteration,
 * where every fault escalates again (rule 1). Past its budget the machine is retired instead: it leaves
 * the job as a faulty machine does (warm standby or a new machine), and the decision names this rule.
 */

/** Acted trainer recoveries of `machineId` (its own faults, restarted in place or escalated) within the window before `now`. */
export function trainerRestartsInWindow(state: Pick<ControllerData, 'trainerRestarts'>, settings: ControllerSettings, machineId: string, now: number): number {
  const since = now - settings.machineRestartWindowMs;
  return (state.trainerRestarts?.[machineId] ?? []).filter((at) => at > since).length;
}

/** The machine used its restarts within the window: the next fault retires it. A budget of 0 never retires. */
export function machineRestartBudgetSpent(used: number, settings: ControllerSettings): DecisionRule | null {
  return settings.machineRestartBudget > 0 && used >= settings.machineRestartBudget ? 'machine-restart-budget-spent' : null;
}

/** More than any sensible budget: older restarts cannot decide anything. */
const KEPT_RESTARTS = 32;

/** The restart times with one more, only as many as can still count (a long job must not grow them without end). */
export function withTrainerRestart(restarts: Record<string, number[]> | undefined, machineId: string, at: number): Record<string, number[]> {
  const times = [...(restarts?.[machineId] ?? []), at];
  return { ...restarts, [machineId]: times.slice(Math.max(0, times.length - KEPT_RESTARTS)) };
}

/**
 * Whether a trainer recovery restarts its machine for a fault of its own (rather than retiring it): a
 * role its agent stopped for a lost broker (`lease-expired`, a partition) is not the machine failing.
 */
export const restartsItsMachine = (d: { action: string; evidence?: { signal?: string } }): boolean =>
  (d.action === 'restart-trainer-group' || d.action === 'restart-task') && !stoppedByItsLease(d.evidence);

/** The fault is a trainer its agent stopped after losing the broker for its lease (a partition), not the machine. */
export const stoppedByItsLease = (evidence: { signal?: string } | undefined): boolean => evidence?.signal === 'lease-expired';
