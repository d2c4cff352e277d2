import type { Logger } from '@nestjs/common';
import type { MessageOf, Role } from '@robustrl/contracts';
import type { AgentConfig } from '../agent-config';
import { AGENT_CREDENTIALS } from '../role-credentials';
import { roleEnv } from '../role-env';
import { RoleExit, RoleProcess } from '../role-process';
import { RestartContext, restartEnv } from '../trainer-group';
import type { RoleExecutor, RoleStatus } from './role-executor';

/**
 * The agent as the parent of its role process (`ROBUSTRL_INTEGRATION=supervise`, the default): the
 * process is the role's command (`ROBUSTRL_<ROLE>_COMMAND`), a restart stops its tree and runs the
 * command again with the group's environment, an exit the agent did not ask for is a fault signal
 * (`onExit`).
 */
export class SupervisedRole implements RoleExecutor {
  readonly mode = 'supervise';
  readonly process: RoleProcess;

  constructor(
    private readonly config: Pick<AgentConfig, 'roleCommands' | 'stopGraceMs' | 'apiToken' | 'jobId' | 'machineId'>,
    private readonly now: { role: () => Role; apiUrl: () => string },
    private readonly logger: Logger,
    onExit: (exit: RoleExit) => void,
  ) {
    this.process = new RoleProcess({
      stopGraceMs: config.stopGraceMs,
      onExit,
      onOutput: (line) => logger.log(`[${now.role()}] ${line}`),
      // The framework is the user's code: it gets a token of the agent's API (roleEnv), not the agent's credentials.
      withheldEnv: AGENT_CREDENTIALS,
    });
  }

  /** The command of the machine's current role, if one is configured. */
  command(): string | undefined {
    return this.config.roleCommands[this.now.role()];
  }

  /** Starts the role's command (a first launch); `extra`: a group's rank and rendezvous. */
  async launch(command: string, extra: Record<string, string>): Promise<number> {
    return this.process.start(command, this.env(extra));
  }

  running(): boolean {
    return this.process.running;
  }

  /** A machine with no role command runs a framework started by someone else: vouched for as it is. */
  vouches(): boolean {
    return !this.command() || this.process.running;
  }

  async restartTrainer(m: MessageOf<'RestartTrainerGroup'>, context: RestartContext): Promise<void> {
    const role = this.now.role();
    const command = this.command();
    if (!command) throw new Error(`no command configured for the ${role} role on ${this.config.machineId}`);
    // A process started after the command was issued is already the restarted one (e.g. the whole machine came back).
    if (this.process.running && (this.process.startedAt ?? 0) > Date.parse(m.occurredAt)) return;
    const pid = await this.process.restart(command, this.env(restartEnv(context)));
    const g = context.group;
    this.logger.log(
      `${role} process restarted (pid ${pid}) for ${m.data.recoveryId}, reloading checkpoint ${m.data.checkpointStep ?? 'none'}, retrying step ${m.data.step}` +
        ` as rank ${g.rank} of ${g.worldSize}${g.masterAddr ? ` meeting at ${g.masterAddr}:${g.masterPort}` : ''}`,
    );
  }

  async restartEngine(m: MessageOf<'RestartRolloutEngine'>): Promise<void> {
    const command = this.config.roleCommands.rollout;
    if (!command) throw new Error(`no command configured for the rollout role on ${this.config.machineId} (ROBUSTRL_ROLLOUT_COMMAND)`);
    const pid = await this.process.restart(command, this.env({}));
    this.logger.log(`rollout engine restarted in place (pid ${pid}) for ${m.data.recoveryId}: restart ${m.data.attempt} of ${m.data.budget} in the window`);
  }

  async yieldToTrainer(): Promise<void> {
    if (!this.config.roleCommands.trainer)
      throw new Error(`${this.config.machineId} has no trainer command (ROBUSTRL_TRAINER_COMMAND) and cannot be a warm standby`);
    await this.process.stop();
  }

  stop(): Promise<void> {
    return this.process.stop();
  }

  close(): Promise<void> {
    return this.process.stop();
  }

  status(): RoleStatus {
    return { roleProcess: { pid: this.process.pid, running: this.process.running, restarts: this.process.restarts } };
  }

  private env(extra: Record<string, string>): Record<string, string> {
    return roleEnv(this.config, { apiUrl: this.now.apiUrl(), role: this.now.role(), restarts: this.process.restarts }, extra);
  }
}
