import type { MessageOf } from '@robustrl/contracts';
import type { RestartContext } from '../trainer-group';

/**
 * Who does the process work of the controller's commands on this machine (docs/integrators/integrate-your-job.md).
 * The agent does its own part of every command around it — records the restart, drops the weights it
 * pulled, switches the role, answers the controller — and asks its executor for the rest:
 *
 * - `supervise` (supervised-role.ts): the agent is the parent of the role process; it stops the process
 *   tree and runs the role's command again;
 * - `cooperate` (cooperating-framework.ts): the framework owns its processes (a Ray driver, torchrun);
 *   it is handed the command (`GET /v1/commands`) and reports the outcome.
 *
 * Every command method resolves once the work is done and rejects with the reason it could not be; the
 * agent turns that into the command's answer. A method may take as long as the work takes: the
 * controller's command timeout bounds it, not the executor.
 */
export interface RoleExecutor {
  readonly mode: 'supervise' | 'cooperate';
  /** Whether the role runs: its process alive, or a framework following commands. */
  running(): boolean;
  /** Whether the agent may answer a heartbeat probe for the role. */
  vouches(): boolean;
  /** Restart this machine's trainer as `context` says (rank, group, step, checkpoint). */
  restartTrainer(m: MessageOf<'RestartTrainerGroup'>, context: RestartContext): Promise<void>;
  /** Restart the rollout engine in place. */
  restartEngine(m: MessageOf<'RestartRolloutEngine'>): Promise<void>;
  /** Stop serving rollouts: the machine is lent to the trainer group as warm standby. */
  yieldToTrainer(m: MessageOf<'PromoteRolloutToTrainer'>): Promise<void>;
  /** Stop the role now (fenced out by a newer group, lease on the broker lost); `cause` names the occasion. */
  stop(cause: string, reason: string): Promise<void>;
  /** The agent stops. */
  close(): Promise<void>;
  /** What `GET /v1/status` shows of it. */
  status(): RoleStatus;
}

/** The role as `GET /v1/status` shows it: the supervised process, or the cooperating framework. */
export interface RoleStatus {
  roleProcess?: { pid: number | null; running: boolean; restarts: number };
  framework?: { attached: boolean; openCommands: Array<{ commandId: string; type: string; acknowledged: boolean }> };
}
