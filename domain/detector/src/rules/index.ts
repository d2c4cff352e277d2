import { AgentSilentRule } from './agent-silent.rule';
import { DetectionRule } from './detection-rule';
import { ExplicitSignalRule } from './explicit-signal.rule';
import { RolloutRequestsRule } from './rollout-requests.rule';
import { RolloutSilentRule } from './rollout-silent.rule';
import { StragglerRule } from './straggler.rule';
import { TrainerIdleRule } from './trainer-idle.rule';

export * from './detection-rule';
export * from './blind-interval';
export { AgentSilentRule, ExplicitSignalRule, RolloutRequestsRule, RolloutSilentRule, StragglerRule, TrainerIdleRule };

/** The rules a detector runs unless told otherwise; order is the order findings are reported in. */
export const DEFAULT_DETECTION_RULES: readonly DetectionRule[] = [
  ExplicitSignalRule as DetectionRule,
  TrainerIdleRule as DetectionRule,
  RolloutSilentRule as DetectionRule,
  RolloutRequestsRule as DetectionRule,
  AgentSilentRule as DetectionRule,
  StragglerRule as DetectionRule,
];
