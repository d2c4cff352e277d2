import { TRAJECTORY_STORE_OUTPUT_TYPES } from '@robustrl/trajectory-store';
import { Logger } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { createMessage, RobustrlMessage } from '@robustrl/contracts';
import { holdsServableWeights, machineOfInstance, PoolMachine, RolloutPoolState, servedVersion } from '@robustrl/rollout-manager-domain';
import { HttpAuth, httpAuthFromEnv, reloadTokens } from '@robustrl/service-kit';
import {
  EnginePool,
  EngineSpec,
  GatewayMirror,
  EngineAnnouncer,
  EngineFollower,
  EngineView,
  HttpTrajectoryRecorder,
  LazyStoreRecorder,
  ModelGatewayClient,
  OpenAiRouter,
  RequestEvidence,
  requestsObserved,
  RouterLogger,
  ThroughputMeter,
  throughputSampled,
  TrajectoryRecorder,
} from './router';
import { departureLeaveAt } from './router/departure';
import { RouterConfig } from './router-config';

/** The inputs that can change which engines the router may use. */
const MEMBERSHIP_INPUTS = new Set<RobustrlMessage['type']>([
  'MachineRegistered',
  'MachineDeregistered',
  'MachineRoleChanged',
  'FaultConfirmed',
  'PromoteRolloutToTrainer',
  'RelayJoined',
  'WeightVersionPublished',
]);

/**
 * What the router publishes (the rollout manager's topic rights): each engine's throughput and request
 * evidence for the detector, its engines for router replicas, and — recording in the trajectory store
 * itself — the store's notifications.
 */
export const ROUTER_OUTPUT_TYPES = ['RolloutThroughputSampled', 'RolloutRequestsObserved', 'RouterEnginesAnnounced', ...TRAJECTORY_STORE_OUTPUT_TYPES] as const;

/**
 * The router inside the rollout manager: it serves the agent loops, publishes each engine's
 * throughput for the detector, and follows the pool (router membership was static).
 *
 * An engine routes while its machine serves and holds weights within the job's staleness bound
 * (`holdsServableWeights`): a new or re-admitted rollout joins once it pulled a current version, one
 * that falls behind or whose machine is confirmed faulty, gone or lent to the trainer leaves, and each
 * engine carries the version its machine holds, which the turns it generates are tagged with.
 * Trajectories the pool reassigned stick to their new engine.
 */
export class RouterRuntime {
  private readonly logger = new Logger('router');
  /**
   * The `source` of its telemetry: each router samples only the requests it forwarded, so the detector
   * adds up one share per source (throughput-shares.ts in the detector) — a replica names itself.
   */
  private get telemetrySource(): string {
    return this.config.replica ? `rollout-manager/router/${this.config.replica.replicaId}` : 'rollout-manager/router';
  }
  readonly pool: EnginePool;
  readonly router: OpenAiRouter;
  private readonly meter = new ThroughputMeter(Date.now());
  private readonly evidence = new RequestEvidence(Date.now());
  private timer?: NodeJS.Timeout;
  private readonly auth: HttpAuth;
  private stopReload: () => void = () => undefined;
  private evidenceTimer?: NodeJS.Timeout;
  private mirrorTimer?: NodeJS.Timeout;
  /** Keeps an external gateway's workers equal to the pool, when one is configured. */
  private readonly mirror: GatewayMirror | null;

  /** Where recorded trajectories go: the store itself, the request manager's API, or nowhere. */
  private readonly recorder: TrajectoryRecorder | null;
  private readonly storeRecorder: LazyStoreRecorder | null;
  private readonly follower: EngineFollower | null;
  private readonly announcer: EngineAnnouncer | null;

  /** The operator's engines by machine: they come back when their machine serves again. */
  private readonly listed = new Map<string, EngineSpec[]>();

  constructor(
    private readonly bus: MessageBus,
    readonly config: RouterConfig,
    /** The rollout pool's state of a job, when the rollout manager has one. */
    private readonly poolOf: (jobId: string) => RolloutPoolState | undefined = () => undefined,
  ) {
    const kind = config.engineKind ?? 'vllm';
    const engines = config.engines.map((e) => ({ kind, ...e }));
    for (const e of engines) {
      const machineId = e.machineId ?? e.id;
      this.listed.set(machineId, [...(this.listed.get(machineId) ?? []), e]);
    }
    this.pool = new EnginePool(engines, {
      probeIntervalMs: 5_000,
      // Every move in or out of selection is in the log: it is why a trajectory left its engine's cache.
      onChange: (e, change) =>
        change === 'dead'
          ? this.logger.warn(`engine ${e.id} out of selection: ${e.deadReason ?? 'unknown'}`)
          : this.logger.log(`engine ${e.id} back in selection`),
    });
    const log: RouterLogger = {
      info: (m, f) => this.logger.log(`${m} ${f ? JSON.stringify(f) : ''}`),
      warn: (m, f) => this.logger.warn(`${m} ${f ? JSON.stringify(f) : ''}`),
      error: (m, f) => this.logger.error(`${m} ${f ? JSON.stringify(f) : ''}`),
    };
    this.auth = config.auth ?? httpAuthFromEnv({}, config.host, 'ROBUSTRL_ROUTER');
    this.storeRecorder = config.trajectoryDatabaseUrl ? new LazyStoreRecorder(config.trajectoryDatabaseUrl, bus) : null;
    this.recorder =
      this.storeRecorder ?? (config.requestManagerUrl ? new HttpTrajectoryRecorder(config.requestManagerUrl, { token: config.requestManagerToken }) : null);
    this.router = new OpenAiRouter({
      pool: this.pool,
      bus,
      meter: this.meter,
      evidence: this.evidence,
      defaultEngineKind: kind,
      source: this.telemetrySource,
      auth: this.auth,
      ...(this.recorder ? { recorder: this.recorder } : {}),
      continuation: { policy: config.continuationPolicy, maxStaleness: config.maxStaleness },
      logger: log,
    });
    // A replica follows the engines the rollout manager announces; the rollout manager's router announces them.
    this.follower = config.replica
      ? new EngineFollower(bus, config.jobId, this.pool, engines, log, `robustrl-rollout-manager-router-${config.replica.replicaId}`)
      : null;
    this.announcer = config.replica ? null : new EngineAnnouncer(bus, config.jobId, this.pool, log);
    this.mirror = config.externalRouter
      ? new GatewayMirror(new ModelGatewayClient(config.externalRouter.url, { apiKey: config.externalRouter.apiKey }), log)
      : null;
  }

  async start(): Promise<string> {
    // The pool was refolded before the router starts: engines registered before a restart are known.
    const state = this.poolOf(this.config.jobId);
    if (state) for (const machineId of Object.keys(state.machines)) this.reconcile(state, machineId);
    this.pool.startProbing();
    await this.follower?.start();
    this.announcer?.start();
    const url = await this.router.listen(this.config.port, this.config.host);
    this.stopReload = reloadTokens(this.auth, this.config.authSettings ?? {}, 'ROBUSTRL_ROUTER', { log: (m) => this.logger.log(m) });
    this.timer = setInterval(() => void this.publishThroughput(), this.config.throughputSeconds * 1000);
    this.evidenceTimer = setInterval(() => void this.publishEvidence(), (this.config.evidenceSeconds ?? 1) * 1000);
    if (this.mirror) {
      void this.mirror.sync(this.pool.snapshot());
      // A gateway that was down, or restarted empty, catches up.
      this.mirrorTimer = setInterval(() => void this.mirror?.sync(this.pool.snapshot()), 10_000);
      this.logger.log(`keeping the workers of the gateway at ${this.config.externalRouter!.url} equal to this router's engines`);
    }
    if (this.storeRecorder && !(await this.storeRecorder.warm()))
      this.logger.warn('the trajectory store could not be opened yet: recorded requests are answered 503 until it opens');
    if (!this.recorder)
      this.logger.warn('neither ROBUSTRL_TRAJECTORY_DATABASE_URL nor ROBUSTRL_REQUEST_MANAGER_URL is set: trajectories are routed but not recorded');
    this.logger.log(
      `routing ${this.pool.snapshot().length} engine(s) for job ${this.config.jobId} at ${url}; ` +
        (this.follower ? 'a replica: its engines are the ones the rollout manager announces' : 'more join as rollout machines register'),
    );
    return url;
  }

  async stop(): Promise<void> {
    this.stopReload();
    clearInterval(this.timer);
    clearInterval(this.evidenceTimer);
    clearInterval(this.mirrorTimer);
    this.announcer?.stop();
    await this.follower?.stop();
    await this.router.close();
    await this.storeRecorder?.close();
    await this.pool.stop();
  }

  /** Follow what the rollout pool decided (called by the rollout manager after each applied message). */
  follow(input: RobustrlMessage, emitted: readonly RobustrlMessage[]): void {
    if (input.jobId !== this.config.jobId) return;
    const state = MEMBERSHIP_INPUTS.has(input.type) ? this.poolOf(this.config.jobId) : undefined;
    const machineId = state ? machineNamedBy(state, input) : null;
    if (state && input.type === 'WeightVersionPublished') {
      for (const id of Object.keys(state.machines)) this.reconcile(state, id);
    } else if (state && machineId !== null && state.machines[machineId]) {
      this.reconcile(state, machineId);
    } else {
      this.leaveUnregistered(input);
    }
    for (const m of emitted) {
      if (m.type !== 'TrajectoriesReassigned') continue;
      for (const a of m.data.assignments) this.pool.assign(a.trajectoryId, a.toRolloutId);
    }
    void this.mirror?.sync(this.pool.snapshot());
  }

  /**
   * Make the machine's engines route or not, as the pool's view of it says. Reads the state as it is
   * now (it may be ahead of the input that prompted the call): the result is the same either way.
   */
  private reconcile(state: RolloutPoolState, machineId: string): void {
    const machine = state.machines[machineId];
    if (!machine) return;
    const kind = this.config.engineKind ?? 'vllm';
    const registered = machine.engines
      ? machine.engines.map((e) => ({ id: e.engineId, machineId, baseUrl: e.url, kind }))
      : machine.inferenceUrl
        ? [{ id: machineId, machineId, baseUrl: machine.inferenceUrl, kind }]
        : [];
    const specs = this.listed.get(machineId) ?? registered;
    const present = this.pool.enginesOn(machineId);
    const why = whyNotRouting(machine, state.publishedVersion ?? null, this.config.maxStaleness);
    if (why !== null) {
      for (const e of present) this.leave(e, `its machine ${machineId} ${why}`, machine.status === 'down' ? machine.departsAt : undefined);
      return;
    }
    const weightVersion = servedVersion(machine, state.publishedVersion ?? null);
    // An engine its machine no longer lists (it registered again with fewer) leaves.
    for (const e of present) {
      if (specs.some((spec) => spec.id === e.id)) continue;
      this.logger.warn(`engine ${e.id} leaves the pool: its machine ${machineId} no longer lists it`);
      this.pool.remove(e.id);
      this.evidence.left(e.id);
    }
    for (const spec of specs) {
      const known = present.find((e) => e.id === spec.id);
      if (!known) this.logger.log(`engine ${spec.id} joins the pool at ${spec.baseUrl}: its machine ${machineId} serves weight version ${weightVersion}`);
      else if (known.weightVersion !== weightVersion) this.logger.log(`engine ${spec.id} now serves weight version ${weightVersion}`);
      this.pool.add({ ...spec, machineId, weightVersion });
    }
  }

  /** A machine the pool has no registration of (an operator-listed engine without an agent) leaves on the verdicts that name it. */
  private leaveUnregistered(input: RobustrlMessage): void {
    const leaving =
      input.type === 'FaultConfirmed' && input.data.handledAs === 'rollout'
        ? input.data.machineId
        : input.type === 'MachineDeregistered'
          ? input.data.machineId
          : input.type === 'PromoteRolloutToTrainer'
            ? input.data.rolloutMachineId
            : null;
    if (leaving) {
      const departsAt = input.type === 'FaultConfirmed' ? input.data.evidence.departsAt : undefined;
      for (const e of this.pool.enginesOn(leaving)) {
        this.leave(e, `its machine ${leaving} ${input.type === 'PromoteRolloutToTrainer' ? 'is lent to the trainer' : 'stopped serving'}`, departsAt);
      }
    }
  }

  /**
   * An engine stops routing: at once, or — its machine announced when it goes — drained: no new
   * request, the ones it holds kept until shortly before the machine goes (departure.ts).
   */
  private leave(e: EngineView, why: string, departsAt: string | undefined): void {
    if (e.leavesAt !== null) return;
    const now = Date.now();
    const leaveAt = departsAt === undefined ? now : departureLeaveAt(Date.parse(departsAt), now);
    if (leaveAt > now && e.inFlight > 0) {
      this.logger.warn(
        `engine ${e.id} drains: ${why}, leaving at ${departsAt}; it keeps its ${e.inFlight} requests in flight for ${leaveAt - now} ms, none new`,
      );
      this.pool.drain(e.id, leaveAt, now);
    } else {
      this.logger.warn(`engine ${e.id} leaves the pool: ${why}`);
      this.pool.remove(e.id);
    }
    this.evidence.left(e.id);
  }

  private async publishThroughput(): Promise<void> {
    const now = Date.now();
    const samples = this.meter.take(
      now,
      this.pool.snapshot().filter((e) => e.alive),
    );
    const messages = samples.map((s) =>
      createMessage('RolloutThroughputSampled', throughputSampled(s, new Date(now).toISOString()), {
        jobId: this.config.jobId,
        source: this.telemetrySource,
        occurredAt: new Date(now).toISOString(),
      }),
    );
    await this.bus.publish(messages as RobustrlMessage[]).catch((err) => this.logger.warn(`throughput not published: ${String(err)}`));
  }

  /** Each engine's request stalls and failures since the last report (the dead ones too: that is the evidence). */
  private async publishEvidence(): Promise<void> {
    const now = Date.now();
    const at = new Date(now).toISOString();
    const messages = this.evidence
      .take(now, this.pool.snapshot())
      .map((r) =>
        createMessage('RolloutRequestsObserved', requestsObserved(r, at), { jobId: this.config.jobId, source: this.telemetrySource, occurredAt: at }),
      );
    if (messages.length === 0) return;
    await this.bus.publish(messages as RobustrlMessage[]).catch((err) => this.logger.warn(`request evidence not published: ${String(err)}`));
  }
}

/** The machine a membership input is about, as the pool knows it. */
function machineNamedBy(state: RolloutPoolState, input: RobustrlMessage): string | null {
  switch (input.type) {
    case 'MachineRegistered':
    case 'MachineDeregistered':
    case 'MachineRoleChanged':
    case 'FaultConfirmed':
      return input.data.machineId;
    case 'PromoteRolloutToTrainer':
      return input.data.rolloutMachineId;
    case 'RelayJoined':
      return machineOfInstance(state, input.data.instanceId);
    default:
      return null;
  }
}

/** Why a machine's engines may not route now, or null when they may. */
function whyNotRouting(machine: PoolMachine, publishedVersion: number | null, maxStaleness: number): string | null {
  if (machine.status === 'lent') return 'is lent to the trainer';
  if (machine.status === 'down') return 'stopped serving (faulty or gone)';
  if (!holdsServableWeights(machine, publishedVersion, maxStaleness))
    return machine.weightVersion === null
      ? `holds no weights yet (version ${publishedVersion} is published): STALE until it pulls one`
      : `holds weight version ${machine.weightVersion}, more than ${maxStaleness} behind ${publishedVersion}: STALE until it catches up`;
  return null;
}
