import type { MessageType } from '@robustrl/contracts';

/**
 * Everything an agent publishes: its machine's registration and role, samples, phases and faults,
 * heartbeat answers, training steps and checkpoints, weight publications and pull outcomes, and its
 * answers to commands. Its broker login may write only these topics (libs/bus/src/kafka/topic-acls.ts,
 * held to this list by test/architecture/topic-rights.spec.ts).
 */
export const AGENT_OUTPUT_TYPES = [
  'MachineRegistered',
  'MachineRoleChanged',
  'GpuActivitySampled',
  'RolePhaseChanged',
  'RolloutThroughputSampled',
  'AgentFaultSignalled',
  'HeartbeatAcked',
  'TrainingStepStarted',
  'TrainingStepCompleted',
  'CheckpointSaved',
  'WeightVersionPublished',
  'WeightPullCompleted',
  'WeightPullFailed',
  'RecoveryCommandSucceeded',
  'RecoveryCommandFailed',
] as const satisfies readonly MessageType[];
export type AgentOutputType = (typeof AGENT_OUTPUT_TYPES)[number];
