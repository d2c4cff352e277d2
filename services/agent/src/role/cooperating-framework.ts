import type { Logger } from '@nestjs/common';
import type { MessageOf } from '@robustrl/contracts';
import type { MachineCommand } from '../command-staleness';
import { CommandMailbox, FrameworkCommand } from '../cooperate/command-mailbox';
import { frameworkCommandOf, stopNotice } from '../cooperate/framework-command';
import type { RestartContext } from '../trainer-group';
import type { RoleExecutor, RoleStatus } from './role-executor';

/**
 * A framework that owns its processes (`ROBUSTRL_INTEGRATION=cooperate`): each command is handed to it
 * through the mailbox (`GET /v1/commands`, command-mailbox.ts has the delivery contract) and done when
 * it reports the outcome. The role runs, and the agent vouches for it, while the framework follows
 * commands (it polls) and was not told to stop (a stop notice holds until the next restart it carries
 * out, as a supervised process stopped stays down); a process of its own that dies, it reports
 * (`POST /v1/errors`, `process-exited`).
 */
export class CooperatingFramework implements RoleExecutor {
  readonly mode = 'cooperate';
  /** Told to stop its role (fenced out, lease lost), and not restarted since. */
  private stopped = false;

  constructor(
    readonly mailbox: CommandMailbox,
    private readonly logger: Logger,
  ) {}

  running(): boolean {
    return !this.stopped && this.mailbox.attached();
  }

  vouches(): boolean {
    return this.running();
  }

  restartTrainer(m: MessageOf<'RestartTrainerGroup'>, context: RestartContext): Promise<void> {
    return this.handOver(m, context);
  }

  restartEngine(m: MessageOf<'RestartRolloutEngine'>): Promise<void> {
    return this.handOver(m, null);
  }

  yieldToTrainer(m: MessageOf<'PromoteRolloutToTrainer'>): Promise<void> {
    return this.handOver(m, null);
  }

  async stop(cause: string, reason: string): Promise<void> {
    this.logger.warn(`asking the framework to stop its role: ${reason}`);
    this.stopped = true;
    this.mailbox.notify(stopNotice(cause, reason));
  }

  async close(): Promise<void> {
    this.mailbox.close('the agent stopped before the framework answered');
  }

  status(): RoleStatus {
    return { framework: { attached: this.mailbox.attached(), openCommands: this.mailbox.openCommands() } };
  }

  private async handOver(m: MachineCommand, context: RestartContext | null): Promise<void> {
    const command: FrameworkCommand = frameworkCommandOf(m, context);
    this.logger.log(`${m.type} ${m.data.commandId} handed to the framework`);
    const outcome = await this.mailbox.offer(command);
    if (!outcome.ok) throw new Error(`the framework could not carry it out: ${outcome.error}`);
    // A restart carried out brings the role back; a promotion leaves it to the group restart that follows.
    if (m.type !== 'PromoteRolloutToTrainer') this.stopped = false;
  }
}
