/**
 * Kafka topics. One topic per concern, so an operator can tail just "verdicts" or just "control",
 * and a consumer group subscribes only to what its rules read. Every record is keyed by job id.
 */
export const Topics = {
  membership: 'robustrl.membership',
  telemetry: 'robustrl.telemetry',
  heartbeat: 'robustrl.heartbeat',
  verdicts: 'robustrl.verdicts',
  control: 'robustrl.control',
  /**
   * What executors answer to commands (agents, the controller's orchestrator executor). Apart from
   * control so that the broker can let agents write their answers and no command (topic ACLs).
   */
  replies: 'robustrl.replies',
  trajectories: 'robustrl.trajectories',
  weights: 'robustrl.weights',
  training: 'robustrl.training',
} as const;
export type TopicName = (typeof Topics)[keyof typeof Topics];
export const ALL_TOPICS: readonly TopicName[] = Object.values(Topics);

/** Where records go that could not be handled: the original bytes plus the reason, in headers. */
export const DEAD_LETTER_TOPIC = 'robustrl.dead-letter';
