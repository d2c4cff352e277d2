import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { SpanStatusCode } from '@opentelemetry/api';
import { Delivery, MessageBus, Subscription } from '@robustrl/bus';
import { createCausedMessage, createMessage, DataOf, MessageOf, MessageType, RobustrlMessage, Role, RolePhase, Topics } from '@robustrl/contracts';
import { tracer } from '@robustrl/telemetry';
import { AgentConfig } from './agent-config';
import { EmulatedGpuActivitySource, GpuActivitySource, selectGpuActivitySource } from './gpu-activity';
import { BrokerLease, RoleLeaseGuard } from './broker-lease';
import { RoleExit, RoleProcess } from './role-process';
import { AGENT_CREDENTIALS } from './role-credentials';
import { awaitFirstLaunchGroup } from './first-launch';
import { groupEnv, RestartContext, restartContextOf, restartEnv } from './trainer-group';
import { fencedOutBy } from './trainer-fence';
import { fetchKeptBatch } from './kept-batch';
import { exitCodeOf, faultSignal } from './fault-signal';
import { roleEnv } from './role-env';
import { MachineCommand, staleness } from './command-staleness';
import { WeightPlane } from './weights/weight-plane';
import { EngineWeightSync, managedVllmEngine } from './engine-weights/engine-weight-sync';

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

type AgentCommand = MachineCommand | MessageOf<'HeartbeatProbeRequested'>;

/**
 * The agent on one GPU machine (paper §3, §4): registers the machine, samples GPU activity, relays
 * what the framework reports, answers heartbeat probes, reports role-process exits, and carries out
 * the recovery commands addressed to this machine.
 */
export class AgentRuntime {
  private readonly logger: Logger;
  private readonly roleProcess: RoleProcess;
  private gpuSource: GpuActivitySource = new EmulatedGpuActivitySource();
  private gpuSourceReason = 'not selected yet';
  private sampler?: NodeJS.Timeout;
  private subscription?: Subscription;
  private readonly executed = new Set<string>();
  /**
   * This process's registration epoch: when it started and a random part. Commands name the incarnation
   * they were issued for; one for another (a predecessor's, read back from the topic) is not ours to run.
   */
  readonly startedAt = Date.now();
  readonly incarnation = `${new Date(this.startedAt).toISOString()}/${randomUUID().slice(0, 8)}`;
  role: Role;
  phase: RolePhase | null = null;
  step = 0;
  private closing = false;
  readonly weights: WeightPlane;
  /** The last group restart this machine carried out: what the restarted trainer asks for (GET /v1/restart). */
  restart: RestartContext | null = null;
  /** With ROBUSTRL_ENGINE_WEIGHTS=vllm: keeps the rollout engine on the newest version held whole. */
  private engineWeights?: EngineWeightSync;
  /** The trainer role held on broker contact (broker-lease.ts). */
  private readonly leaseGuard: RoleLeaseGuard;
  /**
   * The trainer epoch this machine's trainer was started at (trainer-fence.ts), which its manifests
   * carry: a first launch's group's or the last group restart's. Unknown (manifests carry none, the
   * registry does not fence them) for a trainer started without a group of the agent's forming.
   */
  private trainerEpoch: number | undefined;

  constructor(
    private readonly bus: MessageBus,
    readonly config: AgentConfig,
  ) {
    this.role = config.role;
    this.logger = new Logger(`agent/${config.machineId}`);
    this.leaseGuard = new RoleLeaseGuard(new BrokerLease(config.leaseMs, Date.now()), {
      held: () => !this.closing && this.role !== 'rollout' && this.roleProcess.running,
      stop: () => this.roleProcess.stop(),
      report: (detail) => this.emit('AgentFaultSignalled', faultSignal(this.config.machineId, this.role, 'lease-expired', detail)).then(() => undefined),
      logger: this.logger,
    });
    this.roleProcess = new RoleProcess({
      stopGraceMs: config.stopGraceMs,
      onExit: (exit) => void this.onRoleExit(exit),
      onOutput: (line) => this.logger.log(`[${this.role}] ${line}`),
      // The framework is the user's code: it gets a token of the agent's API (roleEnv), not the agent's credentials.
      withheldEnv: AGENT_CREDENTIALS,
    });
    const { weights } = config;
    this.weights = new WeightPlane(
      {
        jobId: config.jobId,
        machineId: config.machineId,
        bindHost: weights.bindHost,
        port: weights.port,
        advertiseHost: weights.advertiseHost,
        shmDir: weights.shmDir,
        limits: weights,
        cudaDevice: weights.cudaDevice,
        machineKey: config.machineKey,
        publisherCertificate: () => this.certificateOf(this.role).roleCertificate,
        trainerEpoch: () => this.trainerEpoch,
      },
      bus,
      (type, data, cause) => this.emit(type, data, cause),
    );
  }

  async start(apiUrl: string): Promise<void> {
    this.apiUrl = apiUrl;
    const selection = await selectGpuActivitySource({ dcgmUrl: this.config.dcgmUrl, preferred: this.config.preferredGpuSource, gpus: this.config.gpus });
    this.gpuSource = selection.source;
    this.gpuSourceReason = selection.reason;
    this.logger.log(`GPU activity source: ${selection.reason}`);
    if (selection.source.kind === 'emulated')
      this.logger.warn('no hardware GPU activity source: the framework must POST /v1/gpu-activity, or a trainer reads as idle');

    // Each agent sees every command and probe (its own consumer group) and picks those addressed to it.
    this.subscription = await this.bus.subscribe({
      groupId: `robustrl-agent-${this.config.machineId}`,
      topics: [Topics.control, Topics.heartbeat],
      types: ['RestartTrainerGroup', 'PromoteRolloutToTrainer', 'RestartRolloutEngine', 'HeartbeatProbeRequested'],
      handler: (d) => this.onCommand(d as Delivery<AgentCommand>),
    });
    // Without UCX the machine registers without a weight server: the registry leaves it out of weight
    // transfer, and the weight endpoints of the API answer 503 with the reason.
    await this.weights.start();
    if (this.config.engineWeights === 'vllm') {
      this.engineWeights = managedVllmEngine(
        this.config,
        () => this.heldForEngine(),
        (phase, version) => {
          // The engine's phase, reported for it; only a change is an event.
          if (this.role === 'rollout' && this.phase !== phase) void this.reportPhase(phase, version);
        },
        (detail, how, forMs) => void this.signalEngineStalled(detail, how === 'load' ? 'weight-load-stalled' : 'engine-unresponsive', forMs),
      );
      this.engineWeights.start();
    }
    await this.register();
    const command = this.config.roleCommands[this.role];
    if (!command) {
      this.logger.log('no role command configured: the framework is started by someone else; process exits cannot be observed');
    } else if (this.role === 'trainer' && this.config.trainerWorldSize !== null) {
      // In the background: the agent answers probes and commands while its group gathers.
      void this.firstLaunchInGroup(command, this.config.trainerWorldSize).catch((err: unknown) =>
        this.logger.error(`trainer first launch failed: ${err instanceof Error ? err.message : String(err)}`),
      );
    } else {
      const pid = await this.roleProcess.start(command, this.roleEnv(apiUrl, {}));
      this.logger.log(`${this.role} process started (pid ${pid})`);
    }
    this.sampler = setInterval(() => void this.sampleGpu(), this.config.gpuSampleSeconds * 1000);
    this.leaseGuard.start();
  }

  /**
   * A trainer's first launch with its group from the job's membership (first-launch.ts): rank,
   * world size and rank 0's host, as a restart gets them from the controller. A restart command that
   * arrives first wins: the controller's group is the newer word.
   */
  private async firstLaunchInGroup(command: string, worldSize: number): Promise<void> {
    const group = await awaitFirstLaunchGroup(
      this.bus,
      { jobId: this.config.jobId, machineId: this.config.machineId, worldSize, rendezvousPort: this.config.rendezvousPort, startedAt: this.startedAt },
      () => this.closing || this.restart !== null,
      (line) => this.logger.log(line),
    );
    if (!group || this.closing || this.restart !== null || this.roleProcess.running) return;
    this.trainerEpoch = group.trainerEpoch ?? this.trainerEpoch;
    const pid = await this.roleProcess.start(command, this.roleEnv(this.apiUrl, groupEnv(group)));
    this.logger.log(`trainer process started (pid ${pid}) as rank ${group.rank} of ${group.worldSize} meeting at ${group.masterAddr}:${group.masterPort}`);
  }

  private apiUrl = '';

  /** Announces this machine to the job: on start, and again when its rollout engine restarted in place. */
  private async register(cause?: MessageOf<'RestartRolloutEngine'>): Promise<void> {
    const weightsAddress = this.weights.address;
    await this.emit(
      'MachineRegistered',
      {
        machineId: this.config.machineId,
        role: this.role,
        zone: this.config.zone,
        hardwareClass: this.config.hardwareClass,
        gpus: this.config.gpus,
        agentAddress: this.apiUrl,
        hostAddress: this.config.hostAddress,
        dpRank: this.config.dpRank,
        ...(weightsAddress ? { weightsAddress } : {}),
        ...(this.config.inferenceUrl ? { inferenceUrl: this.config.inferenceUrl } : {}),
        incarnation: this.incarnation,
        ...this.certificateOf(this.role),
      },
      cause,
    );
  }

  async stop(): Promise<void> {
    this.closing = true;
    clearInterval(this.sampler);
    this.leaseGuard.stop();
    this.engineWeights?.stop();
    await this.subscription?.close();
    await this.roleProcess.stop();
    await this.weights.stop();
  }

  /** What the engine should serve: the newest version held whole, while this machine serves rollouts. */
  private heldForEngine() {
    if (this.role === 'trainer' || !this.weights.available) return null;
    const latest = this.weights.latest();
    return latest === null ? null : { version: latest.version, parts: latest.parts };
  }

  status() {
    return {
      jobId: this.config.jobId,
      machineId: this.config.machineId,
      role: this.role,
      phase: this.phase,
      step: this.step,
      roleProcess: { pid: this.roleProcess.pid, running: this.roleProcess.running, restarts: this.roleProcess.restarts },
      gpuActivitySource: { kind: this.gpuSource.kind, reason: this.gpuSourceReason },
      weights: { available: this.weights.available, address: this.weights.address },
      ...(this.engineWeights ? { engineWeights: { loaded: this.engineWeights.lastLoad } } : {}),
    };
  }

  /**
   * The kept batch of the last restart, from the request manager (kept-batch.ts). Null when there was no
   * restart or nothing kept.
   */
  async keptBatch(query: { currentWeightVersion: number; maxStaleness: number }): Promise<unknown> {
    const batchId = this.restart?.batchId;
    return batchId ? fetchKeptBatch(this.config, batchId, query) : null;
  }

  /** The framework's own GPU activity reports; refused when a hardware source is in charge. */
  pushGpuActivity(tensorActive: number, perGpu?: number[]): boolean {
    if (!(this.gpuSource instanceof EmulatedGpuActivitySource)) return false;
    this.gpuSource.push(tensorActive, perGpu);
    return true;
  }

  async reportPhase(phase: RolePhase, step: number): Promise<string> {
    this.phase = phase;
    this.step = step;
    return this.emit('RolePhaseChanged', { machineId: this.config.machineId, role: this.role, phase, step, changedAt: new Date().toISOString() });
  }

  /** Publish a fact observed on this machine; returns its event id. */
  async emit<T extends AgentOutputType>(type: T, data: DataOf<T>, cause?: RobustrlMessage): Promise<string> {
    const ctx = { source: `agent/${this.config.machineId}`, occurredAt: new Date().toISOString() };
    const message = cause ? createCausedMessage(type, data, cause, ctx) : createMessage(type, data, { jobId: this.config.jobId, ...ctx });
    await this.bus.publish(message as RobustrlMessage);
    this.leaseGuard.renewed();
    return message.eventId;
  }

  private async sampleGpu(): Promise<void> {
    try {
      const reading = await this.gpuSource.sample();
      await this.emit('GpuActivitySampled', {
        machineId: this.config.machineId,
        sampledAt: new Date().toISOString(),
        intervalSeconds: this.config.gpuSampleSeconds,
        tensorActive: reading.tensorActive,
        ...(reading.perGpu.length ? { perGpu: reading.perGpu } : {}),
        source: this.gpuSource.kind,
      });
    } catch (err) {
      // A failed sample is no sample: the detector counts silence as idle, which is the safe side.
      this.logger.warn(`GPU activity sample failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private async onRoleExit(exit: RoleExit): Promise<void> {
    if (!exit.unexpected || this.closing) return;
    // A trainer that exits 0 trained its last step: the job's end, not a fault (the chaos campaign saw
    // every finished job restarted as a task). An engine has no end of its own: any exit stops serving.
    if (exit.code === 0 && exit.signal === null && this.role !== 'rollout') {
      this.logger.log(`${this.role} process finished (exit code 0): its work is done, not a fault`);
      return;
    }
    const how = exit.signal ? `killed by ${exit.signal}` : `exited with code ${exit.code}`;
    this.logger.warn(`${this.role} process ${how}`);
    if (this.role !== 'rollout')
      await this.weights.withdrawPublished(`the ${this.role} process ${how}`).catch((err) => this.logger.error(`withdrawing weights: ${String(err)}`));
    await this.emit(
      'AgentFaultSignalled',
      faultSignal(this.config.machineId, this.role, 'process-exited', `${this.role} process ${how}`, exitCodeOf(exit)),
    ).catch((err) => this.logger.error(`could not report the exit: ${String(err)}`));
  }

  /** An engine wedged in a weight load, or not answering at all: a fault of the rollout role, which the controller answers with an engine restart. */
  private async signalEngineStalled(detail: string, signal: 'weight-load-stalled' | 'engine-unresponsive', evidenceForMs: number): Promise<void> {
    // An engine whose process is gone is not unresponsive: its exit is reported as such (onRoleExit).
    if (this.role !== 'rollout' || (signal === 'engine-unresponsive' && !this.roleProcess.running)) return;
    await this.emit('AgentFaultSignalled', {
      ...faultSignal(this.config.machineId, this.role, signal, detail),
      evidenceForMs: Math.round(evidenceForMs),
    }).catch((err) => this.logger.error(`could not report the stalled engine: ${String(err)}`));
  }

  private async onCommand(delivery: Delivery<AgentCommand>): Promise<void> {
    const m = delivery.message;
    if (m.jobId !== this.config.jobId) return;
    const me = this.config.machineId;
    if (m.type === 'HeartbeatProbeRequested') {
      if (m.data.machineId !== me) return;
      // The agent vouches for its role: with a role process configured, a dead one is not alive.
      if (this.config.roleCommands[this.role] && !this.roleProcess.running) return;
      await this.emit('HeartbeatAcked', { probeId: m.data.probeId, machineId: me, ackedAt: new Date().toISOString() }, m);
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
      incarnation: this.incarnation,
      startedAt: this.startedAt,
      clockSkewMs: this.config.commandClockSkewMs,
    });
    if (stale) {
      this.executed.add(m.data.commandId);
      this.logger.log(`ignoring ${m.type} ${m.data.commandId}: ${stale}`);
      return;
    }
    this.executed.add(m.data.commandId);
    const started = Date.now();
    const span = tracer().startSpan(SPAN_NAMES[m.type], {
      attributes: { 'robustrl.machine_id': me, 'robustrl.command_id': m.data.commandId },
    });
    const answer = { recoveryId: m.data.recoveryId, commandId: m.data.commandId, machineId: me, executor: `agent/${me}` };
    let carriedOut = false;
    try {
      if (m.type === 'RestartTrainerGroup') await this.restartRole(m);
      else if (m.type === 'RestartRolloutEngine') await this.restartEngine(m);
      else await this.promote(m);
      await this.emit('RecoveryCommandSucceeded', { ...answer, durationMs: Date.now() - started }, m);
      carriedOut = true;
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error });
      this.logger.warn(`${m.type} ${m.data.commandId} failed: ${error}`);
      await this.emit('RecoveryCommandFailed', { ...answer, durationMs: Date.now() - started, error }, m);
    } finally {
      span.end();
    }
    // The engine is back with no weights loaded: the machine joins the job again (after its answer, so
    // the answer is not taken back if this fails), the registry has it pull the current version, and
    // the router takes it once it holds that version (issue 14).
    if (m.type === 'RestartRolloutEngine' && carriedOut)
      await this.register(m).catch((err) => this.logger.error(`could not register ${me} again after its engine restart: ${String(err)}`));
  }

  /** A newer group formed without this machine replaced its trainer (trainer-fence.ts): it stops serving and training. */
  private async fenceAgainst(m: MessageOf<'RestartTrainerGroup'>): Promise<void> {
    if (this.role === 'rollout' || !this.roleProcess.running) return;
    const why = fencedOutBy(m, {
      machineId: this.config.machineId,
      // Unknown: started before any group the controller formed (or a task's first): older than every one.
      epoch: this.trainerEpoch ?? 0,
      agentStartedAt: this.startedAt,
      clockSkewMs: this.config.commandClockSkewMs,
    });
    if (!why) return;
    this.logger.warn(`stopping the ${this.role}: ${why}`);
    await this.weights.withdrawPublished(why).catch((err) => this.logger.error(`withdrawing weights: ${String(err)}`));
    await this.roleProcess.stop();
  }

  /** Terminate, re-initialise, reload the last checkpoint and retry the same step (paper §5.1.2). */
  private async restartRole(m: MessageOf<'RestartTrainerGroup'>): Promise<void> {
    const command = this.config.roleCommands[this.role];
    if (!command) throw new Error(`no command configured for the ${this.role} role on ${this.config.machineId}`);
    const context = restartContextOf(m.data, this.config.machineId, this.config.rendezvousPort);
    // Recorded even when no restart follows: the running trainer still asks what to resume with.
    this.restart = context;
    this.trainerEpoch = context.group.trainerEpoch ?? this.trainerEpoch;
    // A process started after the command was issued is already the restarted one (e.g. the whole machine came back).
    if (this.roleProcess.running && (this.roleProcess.startedAt ?? 0) > Date.parse(m.occurredAt)) return;
    const pid = await this.roleProcess.restart(command, this.roleEnv(this.apiUrl, restartEnv(context)));
    this.logger.log(
      `${this.role} process restarted (pid ${pid}) for ${m.data.recoveryId}, reloading checkpoint ${m.data.checkpointStep ?? 'none'}, retrying step ${m.data.step}` +
        ` as rank ${context.group.rank} of ${context.group.worldSize}${context.group.masterAddr ? ` meeting at ${context.group.masterAddr}:${context.group.masterPort}` : ''}`,
    );
  }

  /**
   * Restart the rollout engine in place (issue 14): a crashed engine on a healthy machine is back in
   * seconds, where replacing the machine takes minutes. Its pulled weights are dropped — the new engine
   * holds none until it pulls the current version again.
   */
  private async restartEngine(m: MessageOf<'RestartRolloutEngine'>): Promise<void> {
    if (this.role !== 'rollout') throw new Error(`${this.config.machineId} is a ${this.role} now, not a rollout`);
    const command = this.config.roleCommands.rollout;
    if (!command) throw new Error(`no command configured for the rollout role on ${this.config.machineId} (ROBUSTRL_ROLLOUT_COMMAND)`);
    await this.weights.dropPulled(`the rollout engine restarts in place (${m.data.recoveryId})`);
    const pid = await this.roleProcess.restart(command, this.roleEnv(this.apiUrl, {}));
    this.engineWeights?.engineRestarted();
    // Until it answers again (a managed engine's phase is the agent's to report; a framework reports its own).
    if (this.engineWeights) await this.reportPhase('initializing', this.step);
    this.logger.log(`rollout engine restarted in place (pid ${pid}) for ${m.data.recoveryId}: restart ${m.data.attempt} of ${m.data.budget} in the window`);
  }

  /** Hand this rollout machine to the trainer group: stop generating, switch role; the trainer group restart starts the trainer here. */
  private async promote(m: MessageOf<'PromoteRolloutToTrainer'>): Promise<void> {
    if (!this.config.roleCommands.trainer)
      throw new Error(`${this.config.machineId} has no trainer command (ROBUSTRL_TRAINER_COMMAND) and cannot be a warm standby`);
    await this.roleProcess.stop();
    await this.weights.dropPulled(`lent to the trainer as warm standby for ${m.data.replacesMachineId}`);
    const from = this.role;
    this.role = 'trainer';
    this.phase = null;
    await this.emit(
      'MachineRoleChanged',
      {
        machineId: this.config.machineId,
        from,
        to: 'trainer',
        reason: `warm standby for ${m.data.replacesMachineId} (${m.data.recoveryId})`,
        ...(m.data.roleCertificate ? { roleCertificate: m.data.roleCertificate } : {}),
      },
      m,
    );
    if (m.data.roleCertificate) this.lentCertificate = m.data.roleCertificate;
  }

  /** The certificate this machine shows for `role` (libs/bus role-certificates.ts): the operator's for its starting role, the controller's once lent. */
  private certificateOf(role: string): { roleCertificate?: string } {
    const certificate = role === this.config.role ? this.config.roleCertificate : role === 'trainer' ? this.lentCertificate : undefined;
    return certificate ? { roleCertificate: certificate } : {};
  }

  private lentCertificate: string | undefined;

  private roleEnv(apiUrl: string, extra: Record<string, string>): Record<string, string> {
    return roleEnv(this.config, { apiUrl, role: this.role, restarts: this.roleProcess.restarts }, extra);
  }
}

const SPAN_NAMES: Record<MachineCommand['type'], string> = {
  RestartTrainerGroup: 'restart trainer process',
  RestartRolloutEngine: 'restart rollout engine in place',
  PromoteRolloutToTrainer: 'promote rollout to trainer',
};
