import type { DecisionRule } from '@robustrl/contracts';
import type { ControllerData, ControllerSettings } from './controller.state';

/**
 * The in-place restart budget of rollout engines. A crashed engine on a healthy machine
 * restarts in seconds where a replacement takes minutes (paper: 119 s); but a machine whose engine
 * keeps crashing is not healthy, so past the budget its next process fault replaces it.
 */

/** In-place engine restarts of `machineId` issued within the budget's window before `now`. */
export function engineRestartsInWindow(state: Pick<ControllerData, 'engineRestarts'>, settings: ControllerSettings, machineId: string, now: number): number {
  const since = now - settings.engineRestartWindowMs;
  return (state.engineRestarts?.[machineId] ?? []).filter((at) => at > since).length;
}

/** The machine used its in-place restarts within the window: replace it. */
export function engineRestartBudgetSpent(used: number, settings: ControllerSettings): DecisionRule | null {
  return used >= settings.engineRestartBudget ? 'rollout-restart-budget-spent' : null;
}
