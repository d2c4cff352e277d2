import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { Delivery, MessageBus, Subscription } from '@robustrl/bus';
import { createCausedMessage, createMessage, DataOf, MessageOf, RobustrlMessage, Role, RolePhase, Topics } from '@robustrl/contracts';
import { AgentConfig } from './agent-config';
import type { AgentOutputType } from './agent-outputs';
import { GpuSampler } from './gpu-activity/gpu-sampler';
import { BrokerLease, RoleLeaseGuard } from './broker-lease';
import type { RoleExit } from './role-process';
import { awaitFirstLaunchGroup } from './first-launch';
import { groupEnv, RestartContext, restartEnv, TrainerGroup } from './trainer-group';
import { CommandMailbox } from './cooperate/command-mailbox';
import { RoleExecutor } from './role/role-executor';
import { SupervisedRole } from './role/supervised-role';
import { CooperatingFramework } from './role/cooperating-framework';
import { fetchKeptBatch } from './kept-batch';
import { exitCodeOf, faultSignal } from './fault-signal';
import { AgentCommand, AgentCommands } from './agent-commands';
import { WeightPlane } from './weights/weight-plane';
import { MachineEngines } from './engine-weights/machine-engines';
import { EngineEndpoint } from './engine-endpoints';
import { MachineNotices } from './notices/machine-notices';

export { AGENT_OUTPUT_TYPES, AgentOutputType } from './agent-outputs';

/**
 * The agent on one GPU machine (paper §3, §4): registers the machine, samples GPU activity, relays
 * what the framework reports, answers heartbeat probes, reports role-process exits, and carries out
 * the recovery commands addressed to this machine (agent-commands.ts).
 */
export class AgentRuntime {
  private readonly logger: Logger;
  /** Who does the process work of commands (role/role-executor.ts); `supervised` is it when the agent supervises. */
  private readonly executor: RoleExecutor;
  private readonly supervised: SupervisedRole | null;
  private readonly gpu: GpuSampler;
  private subscription?: Subscription;
  /** The commands addressed to this machine (agent-commands.ts). */
  private readonly commands: AgentCommands;
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
  /** The engines this machine hosts: its settings', or those its framework told (setEngines). */
  private readonly engines: MachineEngines;
  /** The trainer role held on broker contact (broker-lease.ts). */
  private readonly leaseGuard: RoleLeaseGuard;
  /** The cloud's notices and SIGTERM: this machine is about to go (notices/), reported as node-draining. */
  private readonly notices: MachineNotices;
  /**
   * The trainer epoch this machine's trainer was started at (trainer-fence.ts), which its manifests
   * carry: a first launch's group's or the last group restart's. Unknown (manifests carry none, the
   * registry does not fence them) for a trainer started without a group of the agent's forming.
   */
  trainerEpoch: number | undefined;
  /** In cooperate mode (ROBUSTRL_INTEGRATION=cooperate): the commands the framework follows; null when the agent supervises. */
  readonly mailbox: CommandMailbox | null;

  constructor(
    private readonly bus: MessageBus,
    readonly config: AgentConfig,
  ) {
    this.role = config.role;
    this.logger = new Logger(`agent/${config.machineId}`);
    this.engines = new MachineEngines(
      config.machineId,
      config.engines,
      {
        mode: config.engineWeights,
        deadlineMs: config.engineLoadDeadlineMs,
        toldLater: config.integration === 'cooperate',
        held: () => this.heldForEngine(),
        // The engines' phase, reported for them; only a change is an event.
        phase: (phase, version) => {
          if (this.role === 'rollout' && this.phase !== phase) void this.reportPhase(phase, version);
        },
        onStalled: (detail, how, forMs) => void this.signalEngineStalled(detail, how === 'load' ? 'weight-load-stalled' : 'engine-unresponsive', forMs),
      },
      this.logger,
    );
    this.mailbox = config.integration === 'cooperate' ? new CommandMailbox(config.frameworkAttachedMs) : null;
    this.supervised = this.mailbox
      ? null
      : new SupervisedRole(config, { role: () => this.role, apiUrl: () => this.apiUrl }, this.logger, (exit) => void this.onRoleExit(exit));
    this.executor = this.supervised ?? new CooperatingFramework(this.mailbox!, this.logger);
    this.leaseGuard = new RoleLeaseGuard(new BrokerLease(config.leaseMs, Date.now()), {
      held: () => !this.closing && this.role !== 'rollout' && this.executor.running(),
      stop: () => this.executor.stop(`lease/${Date.now()}`, 'this machine lost its lease on the broker: a replacement may be training'),
      report: (detail) => this.emit('AgentFaultSignalled', faultSignal(this.config.machineId, this.role, 'lease-expired', detail)).then(() => undefined),
      logger: this.logger,
    });
    this.notices = new MachineNotices(config, {
      report: (detail, departsInMs) =>
        this.emit('AgentFaultSignalled', { ...faultSignal(this.config.machineId, this.role, 'node-draining', detail), departsInMs }).then(() => undefined),
      rolesRunning: () => this.executor.running(),
      closing: () => this.closing,
      logger: { log: (line) => this.logger.log(line), warn: (line) => this.logger.warn(line) },
    });
    this.gpu = new GpuSampler(
      {
        machineId: config.machineId,
        intervalSeconds: config.gpuSampleSeconds,
        dcgmUrl: config.dcgmUrl,
        preferred: config.preferredGpuSource,
        gpus: config.gpus,
      },
      (sample) => this.emit('GpuActivitySampled', sample),
      this.logger,
    );
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
    this.commands = new AgentCommands(this, this.executor, this.engines, this.notices, this.logger);
  }

  async start(apiUrl: string): Promise<void> {
    this.apiUrl = apiUrl;
    await this.gpu.select();

    // Each agent sees every command and probe (its own consumer group) and picks those addressed to it.
    this.subscription = await this.bus.subscribe({
      groupId: `robustrl-agent-${this.config.machineId}`,
      topics: [Topics.control, Topics.heartbeat],
      types: ['RestartTrainerGroup', 'PromoteRolloutToTrainer', 'RestartRolloutEngine', 'HeartbeatProbeRequested', 'ReplaceMachine'],
      handler: (d) => this.commands.onCommand(d as Delivery<AgentCommand>),
    });
    // Without UCX the machine registers without a weight server: the registry leaves it out of weight
    // transfer, and the weight endpoints of the API answer 503 with the reason.
    await this.weights.start();
    this.engines.start();
    await this.register();
    const command = this.supervised?.command();
    const worldSize = this.config.trainerWorldSize;
    if (!this.supervised) this.logger.log("cooperate mode: the framework owns its processes and follows this agent's commands (GET /v1/commands)");
    if (this.role === 'trainer' && worldSize !== null && (command || !this.supervised)) {
      // In the background: the agent answers probes and commands while its group gathers.
      void this.firstLaunchInGroup(command, worldSize).catch((err: unknown) =>
        this.logger.error(`trainer first launch failed: ${err instanceof Error ? err.message : String(err)}`),
      );
    } else if (this.supervised && !command) {
      this.logger.log('no role command configured: the framework is started by someone else; process exits cannot be observed');
    } else if (this.supervised && command) {
      const pid = await this.supervised.launch(command, {});
      this.logger.log(`${this.role} process started (pid ${pid})`);
    }
    this.gpu.start();
    this.leaseGuard.start();
    this.notices.start();
  }

  /**
   * A trainer's first launch with its group from the job's membership (first-launch.ts): rank,
   * world size and rank 0's host, as a restart gets them from the controller. A restart command that
   * arrives first wins: the controller's group is the newer word. A cooperating framework gets the
   * group from GET /v1/launch and launches itself.
   */
  private async firstLaunchInGroup(command: string | undefined, worldSize: number): Promise<void> {
    const group = await awaitFirstLaunchGroup(
      this.bus,
      { jobId: this.config.jobId, machineId: this.config.machineId, worldSize, rendezvousPort: this.config.rendezvousPort, startedAt: this.startedAt },
      () => this.closing || this.restart !== null,
      (line) => this.logger.log(line),
    );
    if (!group || this.closing || this.restart !== null) return;
    this.firstGroup = group;
    this.trainerEpoch = group.trainerEpoch ?? this.trainerEpoch;
    if (!this.supervised || !command || this.supervised.running()) return;
    const pid = await this.supervised.launch(command, groupEnv(group));
    this.logger.log(`trainer process started (pid ${pid}) as rank ${group.rank} of ${group.worldSize} meeting at ${group.masterAddr}:${group.masterPort}`);
  }

  private apiUrl = '';
  /** The group of a trainer's first launch, once formed. */
  private firstGroup: TrainerGroup | null = null;

  /**
   * What a trainer launches with now (GET /v1/launch): the last group restart's group, else the first
   * launch's once formed; null while neither is known. `env` is what a launcher sets (RANK, WORLD_SIZE,
   * MASTER_ADDR, MASTER_PORT, and after a restart the step and checkpoint to resume from).
   */
  launch(): { group: TrainerGroup; env: Record<string, string>; restart: RestartContext | null } | null {
    if (this.restart) return { group: this.restart.group, env: restartEnv(this.restart), restart: this.restart };
    return this.firstGroup ? { group: this.firstGroup, env: groupEnv(this.firstGroup), restart: null } : null;
  }

  /**
   * The engines the framework started (cooperate mode: it owns them, so only it knows where they listen):
   * the machine registers again with them, and the router, the pool and the agent's loads follow.
   */
  async setEngines(engines: EngineEndpoint[]): Promise<void> {
    this.engines.set(engines);
    await this.register();
  }

  /** Announces this machine to the job: on start, and again when its rollout engine restarted in place. */
  async register(cause?: MessageOf<'RestartRolloutEngine'>): Promise<void> {
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
        ...this.engines.registration(),
        incarnation: this.incarnation,
        ...this.certificateOf(this.role),
      },
      cause,
    );
  }

  /**
   * The process got SIGTERM: resolves when it may stop (notices/termination-notice.ts) — at once, or
   * after reporting the machine's departure and keeping its roles running while they are moved.
   */
  terminate(): Promise<void> {
    return this.notices.terminate();
  }

  async stop(): Promise<void> {
    this.closing = true;
    this.gpu.stop();
    this.leaseGuard.stop();
    await this.notices.stop();
    this.engines.stop();
    await this.subscription?.close();
    await this.executor.close();
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
      integration: this.executor.mode,
      ...this.executor.status(),
      gpuActivitySource: this.gpu.status(),
      weights: { available: this.weights.available, address: this.weights.address },
      ...this.engines.status(),
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
    return this.gpu.push(tensorActive, perGpu);
  }

  async reportPhase(phase: RolePhase, step: number): Promise<string> {
    this.phase = phase;
    this.step = step;
    return this.emit('RolePhaseChanged', { machineId: this.config.machineId, role: this.role, phase, step, changedAt: new Date().toISOString() });
  }

  /** The framework reported this machine's departure (`POST /v1/errors` with `node-draining`), as a notice the agent read would. */
  departureAnnounced(): void {
    this.notices.announced();
  }

  /**
   * The trainer saved a checkpoint. On a machine leaving, that ends the step in progress: the trainer
   * stops there, and the group that takes its place begins at the next step (docs/planned-failures.md
   * "A trainer moves at its checkpoint").
   */
  async checkpointSaved(data: DataOf<'CheckpointSaved'>): Promise<string> {
    const eventId = await this.emit('CheckpointSaved', data);
    if (this.notices.departing && this.role === 'trainer' && this.executor.running()) {
      const why = `this machine is leaving: its trainer stops at the checkpoint of step ${data.step}, where its replacement begins`;
      void this.executor.stop(`departing/${data.step}`, why).catch((err: unknown) => this.logger.error(`stopping the trainer: ${String(err)}`));
    }
    return eventId;
  }

  /** Publish a fact observed on this machine; returns its event id. */
  async emit<T extends AgentOutputType>(type: T, data: DataOf<T>, cause?: RobustrlMessage): Promise<string> {
    const ctx = { source: `agent/${this.config.machineId}`, occurredAt: new Date().toISOString() };
    const message = cause ? createCausedMessage(type, data, cause, ctx) : createMessage(type, data, { jobId: this.config.jobId, ...ctx });
    await this.bus.publish(message as RobustrlMessage);
    this.leaseGuard.renewed();
    return message.eventId;
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
    if (this.role !== 'rollout' || (signal === 'engine-unresponsive' && !this.executor.running())) return;
    await this.emit('AgentFaultSignalled', {
      ...faultSignal(this.config.machineId, this.role, signal, detail),
      evidenceForMs: Math.round(evidenceForMs),
    }).catch((err) => this.logger.error(`could not report the stalled engine: ${String(err)}`));
  }
  /** The certificate this machine shows for `role` (libs/bus role-certificates.ts): the operator's for its starting role, the controller's once lent. */
  private certificateOf(role: string): { roleCertificate?: string } {
    const certificate = role === this.config.role ? this.config.roleCertificate : role === 'trainer' ? this.lentCertificate : undefined;
    return certificate ? { roleCertificate: certificate } : {};
  }

  /** The controller's role certificate, once this machine was lent to the trainer (agent-commands.ts). */
  lentCertificate: string | undefined;
}
