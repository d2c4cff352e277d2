import { Logger } from '@nestjs/common';
import { SpanStatusCode } from '@opentelemetry/api';
import { Delivery } from '@robustrl/bus';
import { DataOf, MessageOf, RobustrlMessage, Role, RolePhase } from '@robustrl/contracts';
import { tracer } from '@robustrl/telemetry';
import { AgentConfig } from './agent-config';
import type { AgentOutputType } from './agent-outputs';
import { MachineCommand, staleness } from './command-staleness';
import { MachineEngines } from './engine-weights/machine-engines';
import { MachineNotices } from './notices/machine-notices';
import { RoleExecutor } from './role/role-executor';
import { fencedOutBy } from './trainer-fence';
import { RestartContext, restartContextOf } from './trainer-group';
import { WeightPlane } from './weights/weight-plane';

export type AgentCommand = MachineCommand | MessageOf<'HeartbeatProbeRequested'> | MessageOf<'ReplaceMachine'>;

/** What the command side reads and changes of the agent (agent-runtime.ts). */
export interface CommandHost {
  readonly config: AgentConfig;
  readonly startedAt: number;
  readonly incarnation: string;
  role: Role;
  phase: RolePhase | null;
  readonly step: number;
  restart: RestartContext | null;
  trainerEpoch: number | undefined;
  lentCertificate: string | undefined;
  readonly weights: WeightPlane;
  emit<T extends AgentOutputType>(type: T, data: DataOf<T>, cause?: RobustrlMessage): Promise<string>;
  register(cause?: MessageOf<'RestartRolloutEngine'>): Promise<void>;
  reportPhase(phase: RolePhase, step: number): Promise<string>;
}

/**
 * The commands and probes addressed to this machine (paper §5.1), read from the control and heartbeat
 * topics: each command is checked for staleness, carried out once through the role executor and answered.
 */
export class AgentCommands {
  private readonly executed = new Set<string>();

  constructor(
    private readonly agent: CommandHost,
    /** Who does the process work of commands (role/role-executor.ts). */
    private readonly executor: RoleExecutor,
    private readonly engines: MachineEngines,
    private readonly notices: MachineNotices,
    private readonly logger: Logger,
  ) {}

  /** A command or probe of the job's control and heartbeat topics; every agent reads them all and acts on its own. */
  async onCommand(delivery: Delivery<AgentCommand>): Promise<void> {
    const m = delivery.message;
    if (m.jobId !== this.agent.config.jobId) return;
    const me = this.agent.config.machineId;
    if (m.type === 'HeartbeatProbeRequested') {
      if (m.data.machineId !== me) return;
      // The agent vouches for its role: a dead role process, or a framework no longer following commands, is not alive.
      if (!this.executor.vouches()) return;
      await this.agent.emit('HeartbeatAcked', { probeId: m.data.probeId, machineId: me, ackedAt: new Date().toISOString() }, m);
      return;
    }
    // Carried out by the orchestrator, not here; the agent only remembers that its stop was ordered.
    if (m.type === 'ReplaceMachine') {
      if (m.data.machineId === me) this.notices.replacementOrderedBy(m.data.commandId);
      return;
    }
    if (m.type === 'RestartTrainerGroup') await this.fenceAgainst(m);
    const mine =
      m.type === 'RestartTrainerGroup'
        ? m.data.machines.includes(me)
        : m.type === 'RestartRolloutEngine'
          ? m.data.machineId === me
          : m.data.rolloutMachineId === me;
    if (!mine || this.executed.has(m.data.commandId)) return;
    const stale = staleness(m, {
      machineId: me,
      incarnation: this.agent.incarnation,
      startedAt: this.agent.startedAt,
      clockSkewMs: this.agent.config.commandClockSkewMs,
    });
    if (stale) {
      this.executed.add(m.data.commandId);
      this.logger.log(`ignoring ${m.type} ${m.data.commandId}: ${stale}`);
      return;
    }
    this.executed.add(m.data.commandId);
    if (this.executor.mode === 'supervise') return this.answer(m);
    // The framework answers in its own time: the agent goes on reading commands and probes meanwhile.
    void this.answer(m).catch((err) => this.logger.error(`answering ${m.data.commandId}: ${String(err)}`));
  }

  /** Runs a command and tells the controller how it went (paper §5.1: every command is answered). */
  private async answer(m: MachineCommand): Promise<void> {
    const me = this.agent.config.machineId;
    const started = Date.now();
    const span = tracer().startSpan(SPAN_NAMES[m.type], {
      attributes: { 'robustrl.machine_id': me, 'robustrl.command_id': m.data.commandId },
    });
    const answer = { recoveryId: m.data.recoveryId, commandId: m.data.commandId, machineId: me, executor: `agent/${me}` };
    let carriedOut = false;
    try {
      await this.carryOut(m);
      await this.agent.emit('RecoveryCommandSucceeded', { ...answer, durationMs: Date.now() - started }, m);
      carriedOut = true;
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error });
      this.logger.warn(`${m.type} ${m.data.commandId} failed: ${error}`);
      await this.agent.emit('RecoveryCommandFailed', { ...answer, durationMs: Date.now() - started, error }, m);
    } finally {
      span.end();
    }
    // The engine is back with no weights loaded: the machine joins the job again (after its answer, so
    // the answer is not taken back if this fails), the registry has it pull the current version, and
    // the router takes it once it holds that version.
    if (m.type === 'RestartRolloutEngine' && carriedOut)
      await this.agent.register(m).catch((err) => this.logger.error(`could not register ${me} again after its engine restart: ${String(err)}`));
  }

  /** The agent's part of a command around its executor's (role/role-executor.ts). */
  private carryOut(m: MachineCommand): Promise<void> {
    // Terminate, re-initialise, reload the last checkpoint and retry the same step (paper §5.1.2).
    if (m.type === 'RestartTrainerGroup') return this.executor.restartTrainer(m, this.restarting(m));
    if (m.type === 'RestartRolloutEngine') return this.restartEngine(m);
    return this.promote(m);
  }

  /** A newer group formed without this machine replaced its trainer (trainer-fence.ts): it stops serving and training. */
  private async fenceAgainst(m: MessageOf<'RestartTrainerGroup'>): Promise<void> {
    if (this.agent.role === 'rollout' || !this.executor.running()) return;
    const why = fencedOutBy(m, {
      machineId: this.agent.config.machineId,
      // Unknown: started before any group the controller formed (or a task's first): older than every one.
      epoch: this.agent.trainerEpoch ?? 0,
      agentStartedAt: this.agent.startedAt,
      clockSkewMs: this.agent.config.commandClockSkewMs,
    });
    if (!why) return;
    this.logger.warn(`stopping the ${this.agent.role}: ${why}`);
    await this.agent.weights.withdrawPublished(why).catch((err) => this.logger.error(`withdrawing weights: ${String(err)}`));
    await this.executor.stop(`fenced/${m.data.commandId}`, why);
  }

  /**
   * Restart the rollout engine in place: a crashed engine on a healthy machine is back in
   * seconds, where replacing the machine takes minutes. Its pulled weights are dropped — the new engine
   * holds none until it pulls the current version again.
   */
  private async restartEngine(m: MessageOf<'RestartRolloutEngine'>): Promise<void> {
    if (this.agent.role !== 'rollout') throw new Error(`${this.agent.config.machineId} is a ${this.agent.role} now, not a rollout`);
    await this.agent.weights.dropPulled(`the rollout engine restarts in place (${m.data.recoveryId})`);
    await this.executor.restartEngine(m);
    this.engines.restarted();
    // Until it answers again (a managed engine's phase is the agent's to report; a framework reports its own).
    if (this.engines.loading) await this.agent.reportPhase('initializing', this.agent.step);
  }

  /** Hand this rollout machine to the trainer group: stop generating, switch role; the trainer group restart starts the trainer here. */
  private async promote(m: MessageOf<'PromoteRolloutToTrainer'>): Promise<void> {
    await this.executor.yieldToTrainer(m);
    await this.agent.weights.dropPulled(`lent to the trainer as warm standby for ${m.data.replacesMachineId}`);
    const from = this.agent.role;
    this.agent.role = 'trainer';
    this.agent.phase = null;
    await this.agent.emit(
      'MachineRoleChanged',
      {
        machineId: this.agent.config.machineId,
        from,
        to: 'trainer',
        reason: `warm standby for ${m.data.replacesMachineId} (${m.data.recoveryId})`,
        ...(m.data.roleCertificate ? { roleCertificate: m.data.roleCertificate } : {}),
      },
      m,
    );
    if (m.data.roleCertificate) this.agent.lentCertificate = m.data.roleCertificate;
  }

  /** Records a group restart: what the restarted trainer asks for (GET /v1/restart), even when no restart follows. */
  private restarting(m: MessageOf<'RestartTrainerGroup'>): RestartContext {
    const context = restartContextOf(m.data, this.agent.config.machineId, this.agent.config.rendezvousPort);
    this.agent.restart = context;
    this.agent.trainerEpoch = context.group.trainerEpoch ?? this.agent.trainerEpoch;
    return context;
  }
}

const SPAN_NAMES: Record<MachineCommand['type'], string> = {
  RestartTrainerGroup: 'restart trainer process',
  RestartRolloutEngine: 'restart rollout engine in place',
  PromoteRolloutToTrainer: 'promote rollout to trainer',
};
