import type { MessageOf } from '@robustrl/contracts';

/**
 * Fencing on the agent (docs/contributors/recovery.md "Fencing"). Every group the controller forms carries a trainer epoch one
 * higher than the last (RestartTrainerGroup.trainerEpoch). A trainer started at an older epoch whose
 * machine a newer group left out was replaced — its machine was cut off and a warm standby took its
 * rank, or it was isolated — so it must stop, whether or not its agent's broker lease (broker-lease.ts)
 * has run out yet: two trainers for one rank would both train and both publish.
 *
 * Every agent reads every group restart on the control topic, its own or not, so an agent that reads
 * one is the first to know. The registry refuses what a fenced trainer publishes all the same
 * (domain/weight-registry publication-authority.ts): an agent that never reads the command (cut off
 * for good) cannot make its old publications live.
 */
export interface FencedTrainer {
  machineId: string;
  /** The epoch this machine's trainer was started at: its first launch's (the task's), or its last group restart's. */
  epoch: number;
  /** When this agent process started (ms, its own clock), and how far a controller's clock may be behind it. */
  agentStartedAt: number;
  clockSkewMs: number;
}

/** Why the group restart `m` replaced this machine's trainer, or null when it did not. */
export function fencedOutBy(m: MessageOf<'RestartTrainerGroup'>, t: FencedTrainer): string | null {
  const epoch = m.data.trainerEpoch;
  if (epoch === undefined || epoch <= t.epoch || m.data.machines.includes(t.machineId)) return null;
  // Read back from before this agent started (its consumer group resumed behind it): of a previous
  // incarnation's group, which this process's trainer never belonged to.
  if (Date.parse(m.occurredAt) < t.agentStartedAt - t.clockSkewMs) return null;
  return `the trainer group was formed again at epoch ${epoch} without ${t.machineId} (${m.data.recoveryId}); this trainer was started at epoch ${t.epoch}`;
}
