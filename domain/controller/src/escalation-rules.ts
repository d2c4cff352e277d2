import type { DecisionRule } from '@robustrl/contracts';
import type { ControllerData, Recovery } from './controller.state';

/**
 * When a role restart is not enough and the whole task restarts (paper §5.1.2). Role restarts
 * are for machine failures; these three patterns point at code, configuration or a reproducible
 * fault, where restarting a role again would loop forever.
 */

/** Rule 1: a fault in the first iteration of the job, or the first after a resume — rollout faults included (paper footnote 2). */
export function firstIterationFault(state: ControllerData): DecisionRule | null {
  return state.firstIteration ? 'escalate-first-iteration' : null;
}

/** Rule 2: a second trainer fault detected in the same step is reproducible. */
export function repeatedFaultInStep(state: ControllerData, handledAs: 'trainer' | 'rollout'): DecisionRule | null {
  const seen = state.trainerFaultsInStep;
  return handledAs === 'trainer' && seen.step === state.step && seen.count >= 1 ? 'escalate-repeated-fault-in-step' : null;
}

/** Rule 3: one failed restart is allowed; the second one escalates. Rollout replacements never restart the task. */
export function restartFailedTwice(recovery: Recovery): DecisionRule | null {
  return recovery.handledAs === 'trainer' && recovery.failures >= 2 ? 'escalate-restart-failed-twice' : null;
}
