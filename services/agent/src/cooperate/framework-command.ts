import type { MachineCommand } from '../command-staleness';
import { RestartContext, restartEnv } from '../trainer-group';
import type { FrameworkCommand } from './command-mailbox';

/**
 * A machine command as a framework that owns its processes gets it (docs/integrators/integrate-your-job.md): what
 * it needs to carry the command out, nothing of the control plane's own (no certificate, no incarnation).
 *
 * - `RestartTrainerGroup`: restart this machine's trainer processes as `restart` says — the same object
 *   as `GET /v1/restart` (step to retry, checkpoint to reload, kept batch, group: rank, world size,
 *   rendezvous, trainer epoch) — and `env`, the variables a launcher would set (RANK, WORLD_SIZE,
 *   MASTER_ADDR, MASTER_PORT, ROBUSTRL_RETRY_STEP, …).
 * - `RestartRolloutEngine`: restart the engine on this machine (attempt `attempt` of `budget` in the
 *   window); its pulled weights are gone, the framework loads the current version again.
 * - `PromoteRolloutToTrainer`: stop generating on this machine, which becomes a trainer standing in for
 *   `replacesMachineId`; the group restart that follows says when and with which rank to train.
 */
export function frameworkCommandOf(m: MachineCommand, restart: RestartContext | null): FrameworkCommand {
  const base = { commandId: m.data.commandId, recoveryId: m.data.recoveryId, issuedAt: m.occurredAt };
  switch (m.type) {
    case 'RestartTrainerGroup':
      if (restart === null) throw new Error('a trainer group restart needs its restart context');
      return { ...base, type: m.type, restart, env: restartEnv(restart) };
    case 'RestartRolloutEngine':
      return { ...base, type: m.type, attempt: m.data.attempt, budget: m.data.budget };
    case 'PromoteRolloutToTrainer':
      return { ...base, type: m.type, replacesMachineId: m.data.replacesMachineId };
  }
}

/** Asks the framework to stop its role (fenced out, lease lost): no outcome expected, one notice per cause. */
export function stopNotice(cause: string, reason: string): FrameworkCommand {
  return { commandId: `stop/${cause}`, type: 'StopRole', reason };
}
