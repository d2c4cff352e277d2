import type { MessageOf } from '@robustrl/contracts';

/**
 * What a restarted trainer process is told about the group it re-forms with. Pure: from the
 * controller's RestartTrainerGroup command and this machine's id.
 *
 * Ranks are the order of the command's `machines` (the controller keeps the survivors' order and puts
 * a warm standby where the faulty machine was dropped, at the end). Rank 0's reachable host
 * (MachineRegistered.hostAddress; for older agents the host of its agent address) is the rendezvous
 * (torch's MASTER_ADDR); the port is the job's, the same on every agent (`ROBUSTRL_RENDEZVOUS_PORT`).
 * A first launch gets the same variables from first-launch.ts.
 */
export interface TrainerGroup {
  rank: number;
  worldSize: number;
  members: Array<{ machineId: string; rank: number; agentAddress: string | null }>;
  /** Rank 0's host, null when the controller did not know its agent's address. */
  masterAddr: string | null;
  masterPort: number;
  /** The trainer epoch the group is formed at (docs/contributors/recovery.md "Fencing"): the command's, or the task's on a first launch. */
  trainerEpoch?: number;
}

/** What the restarted trainer resumes with: the step it retries, the checkpoint, the batch it keeps, its group. */
export interface RestartContext {
  recoveryId: string;
  commandId: string;
  step: number;
  checkpointStep: number | null;
  keepBatch: boolean;
  /** The batch the retried step began on; null when the step had not started (nothing to keep). */
  batchId: string | null;
  group: TrainerGroup;
}

export function restartContextOf(command: MessageOf<'RestartTrainerGroup'>['data'], machineId: string, rendezvousPort: number): RestartContext {
  const rank = command.machines.indexOf(machineId);
  if (rank < 0) throw new RangeError(`${machineId} is not a member of the group ${command.machines.join(', ')}`);
  const addressOf = (id: string) => command.agentAddresses?.[id] ?? null;
  const rank0 = command.machines[0];
  const agentOfRank0 = addressOf(rank0);
  const master = command.hostAddresses?.[rank0] ?? (agentOfRank0 === null ? null : hostOf(agentOfRank0));
  return {
    recoveryId: command.recoveryId,
    commandId: command.commandId,
    step: command.step,
    checkpointStep: command.checkpointStep,
    keepBatch: command.keepBatch,
    batchId: command.keepBatch ? (command.batchId ?? null) : null,
    group: {
      rank,
      worldSize: command.machines.length,
      members: command.machines.map((id, i) => ({ machineId: id, rank: i, agentAddress: addressOf(id) })),
      masterAddr: master,
      masterPort: rendezvousPort,
      ...(command.trainerEpoch === undefined ? {} : { trainerEpoch: command.trainerEpoch }),
    },
  };
}

/** The host of an agent address: a URL (`http://10.0.0.5:8086`) or `host:port`. */
export function hostOf(address: string): string {
  if (address.includes('://')) return new URL(address).hostname.replace(/^\[(.*)\]$/, '$1');
  const bracketed = /^\[(?<host>[^\]]+)\](:\d+)?$/.exec(address);
  if (bracketed?.groups) return bracketed.groups.host;
  return address.replace(/:\d+$/, '');
}

/** The environment the restarted trainer process starts with: torch's rendezvous variables and ours. */
export function restartEnv(context: RestartContext): Record<string, string> {
  return {
    ROBUSTRL_RESUME_FROM_CHECKPOINT_STEP: context.checkpointStep === null ? '' : String(context.checkpointStep),
    ROBUSTRL_RETRY_STEP: String(context.step),
    ROBUSTRL_KEEP_BATCH: String(context.keepBatch),
    ROBUSTRL_BATCH_ID: context.batchId ?? '',
    ...groupEnv(context.group),
  };
}

/** torch's rendezvous variables (and robustrl's names for them) for a member of `g`: every launch sets them. */
export function groupEnv(g: TrainerGroup): Record<string, string> {
  return {
    ROBUSTRL_RANK: String(g.rank),
    ROBUSTRL_WORLD_SIZE: String(g.worldSize),
    ROBUSTRL_GROUP: g.members.map((m) => m.machineId).join(','),
    RANK: String(g.rank),
    WORLD_SIZE: String(g.worldSize),
    ...(g.masterAddr === null ? {} : { MASTER_ADDR: g.masterAddr, MASTER_PORT: String(g.masterPort) }),
    ...(g.trainerEpoch === undefined ? {} : { ROBUSTRL_TRAINER_EPOCH: String(g.trainerEpoch) }),
  };
}
