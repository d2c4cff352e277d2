import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, createWriteStream, mkdirSync, openSync, WriteStream, writeFileSync } from 'node:fs';
import { Server } from 'node:http';
import { join, resolve } from 'node:path';
import { BusLogger, KafkaBus, Subscription } from '@robustrl/bus';
import { createMessage, MessageOf, RobustrlMessage, Topics, TrajectoryWithTurns } from '@robustrl/contracts';
import { LocalProcessSupervisor, MachineSpec, serveOrchestrator } from '@robustrl/orchestrator';
import { NetnsHosts } from '../hosts/netns-hosts';
import { ChaosJob, ChaosJobContext, machinesOf } from './chaos-job';
import { openRecoveries } from './campaign-view';
import { classScorecard, LedgerRow } from './class-scorecard';
import { campaignChecks, tallyDecisions } from './campaign-checks';
import { campaignTimings, DEFAULT_TIME_SCALE, OBSERVED } from './campaign-settings';
import { FaultHost, injectFault } from './fault-injector';
import { LatencyProxy } from './latency-proxy';
import { skewedClockPreload } from './degraded-faults';
import { PARTITION_FAULTS, PartitionedOrchestrator, Partitions } from './partition-faults';
import { CONTROL_PLANE_SERVICES, ControlPlaneService, FaultKind, faultSchedule, ScheduledFault } from './fault-schedule';
import { freePorts, PrivateInfra, ServiceProcess } from './private-infra';
import { ReferenceJob } from './reference-job';
import { Check, RoleRestart, StoredBatch } from './system-invariants';
import { getJson, InjectedFault, SystemScorecard } from './system-scorecard';
import { ObservedEttr, observedEttr } from './observed-ettr';
import { ObservedSampler } from './observed-sampler';

export { formatSystemScorecard } from './system-scorecard';
export { campaignTimings, DEFAULT_TIME_SCALE } from './campaign-settings';
export type { InjectedFault, SystemScorecard } from './system-scorecard';

/**
 * The whole-system chaos campaign (issue 14; `npm run chaos`, a short version in
 * test/e2e/system-chaos.int.spec.ts): the six parts of robustrl as a deployment runs them — a broker
 * and a PostgreSQL server of the run's own, the detector, controller (its orchestrator over HTTP),
 * request manager, rollout manager (the router in front of the engines) and weight registry as their
 * own processes, and one agent process per machine started by a machine host (the local process
 * supervisor served over HTTP, the controller's orchestrator). The agents run a job (chaos-job.ts):
 * the reference stand-in of clients/python (the fast variant: two trainer ranks, four engines that
 * answer hash words) or the real GRPO job of examples/grpo (`--job grpo`: PyTorch training on two gloo
 * ranks, vLLM engines loading every version the agents move). With `hosts: 'netns'` every machine is a
 * network namespace of its own (../hosts/netns-hosts.ts): its agent, role processes and engine bind its
 * own address, and rendezvous, weight pulls and router traffic cross interfaces.
 *
 * A seeded schedule (fault-schedule.ts) injects faults one after the other, each once the system
 * settled from the last (every service ready, no recovery open, every machine up, the job moved on) and
 * a random gap later. At the end the invariants (system-invariants.ts) are checked on what the run
 * left, and the scorecard says what was injected, how the control plane answered, and what the job's
 * ETTR was.
 */
export interface SystemChaosOptions {
  seed: number;
  faults: number;
  steps: number;
  weights?: Partial<Record<FaultKind, number>>;
  /** The whole run's deadline (job and faults), seconds. */
  deadlineSeconds: number;
  /** Keep the run's folder (servers' data, every process's log) instead of removing it. */
  keep: boolean;
  progress: (line: string) => void;
  /** The job under the campaign (default: the reference stand-in). */
  job?: ChaosJob;
  /** `netns`: every machine a network namespace of its own (root only); `shared`: one host, one loopback. */
  hosts?: 'shared' | 'netns';
  /** The controller's recovery policy: role-based (default) or task-restart for every fault (paper §7's baseline). */
  policy?: 'role-based' | 'task-restart';
  /** The product's detection windows and command timeout divided by this (default DEFAULT_TIME_SCALE). */
  timeScale?: number;
  /** The share of faults injected on top of the previous one (fault-schedule.ts; default 0.25). */
  overlap?: number;
}

export const DEFAULT_SYSTEM_CHAOS: Omit<SystemChaosOptions, 'progress' | 'seed'> = {
  faults: 20,
  steps: 150,
  deadlineSeconds: 1800,
  keep: false,
};

const REPO_ROOT = resolve(__dirname, '..', '..', '..');
const AGENT_MAIN = join(REPO_ROOT, 'services', 'agent', 'dist', 'main.js');

const quiet: BusLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The ETTR the controller reports and the one observed from the processes, read together. */
interface EttrAtEnd {
  ettr: number | null;
  summary: string;
  /** The ETTR ledger's rows (the controller's downtimeLedger): what each outage cost. */
  ledger: LedgerRow[];
  observed: ObservedEttr | null;
}

export async function runSystemChaos(options: SystemChaosOptions): Promise<SystemScorecard> {
  const { progress } = options;
  const job = options.job ?? new ReferenceJob();
  job.prepare();
  // On hosts of their own, machines can be cut off: partitions join the mix.
  const partitionWeights = options.hosts === 'netns' ? Object.fromEntries(PARTITION_FAULTS.map((k) => [k, 1])) : {};
  const weights = { ...partitionWeights, ...job.faultWeights, ...options.weights };
  const schedule = faultSchedule({ seed: options.seed, faults: options.faults, weights, overlap: options.overlap });
  const hosts = options.hosts === 'netns' ? NetnsHosts.create() : null;
  // The broker on an address of its own, so that a machine can be cut from it alone.
  const infra = await PrivateInfra.create({ kafkaHost: hosts?.brokerAddress });
  const run = new CampaignRun(infra, { ...options, job }, schedule, hosts);
  const cleanUp = async () => {
    await run.teardown();
    hosts?.destroy();
    if (options.keep) {
      infra.stop();
      progress(`kept ${infra.dir} (logs in ${join(infra.dir, 'logs')}; the servers' data beside them); the broker and PostgreSQL are stopped`);
    } else infra.destroy();
  };
  // Ctrl-C (or a CI timeout's SIGTERM) must not leave a broker, a database and a dozen processes behind.
  const interrupted = (signal: NodeJS.Signals) => {
    progress(`${signal}: stopping the campaign's processes and servers`);
    void cleanUp().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    return await run.execute();
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    await cleanUp();
  }
}

class CampaignRun {
  private readonly jobId: string;
  private readonly logDir: string;
  private readonly stateDir: string;
  private readonly services = new Map<ControlPlaneService, ServiceProcess>();
  private supervisor?: LocalProcessSupervisor;
  private orchestratorServer?: Server;
  private bus?: KafkaBus;
  private observer?: Subscription;
  private agentLoops?: ChildProcess;
  /** Samples the processes each second for the ETTR observed apart from the control plane. */
  private processSampler?: ObservedSampler;
  private agentLoopsExit: number | null | undefined = undefined;
  private readonly events: RobustrlMessage[] = [];
  private readonly eventIds = new Set<string>();
  /** When the observer read each WeightVersionPublished (by event id). */
  private readonly visibleAt = new Map<string, number>();
  private readonly roleRestarts: RoleRestart[] = [];
  private readonly machineLogs = new Map<string, WriteStream>();
  private readonly injected: InjectedFault[] = [];
  private readonly notes: string[] = [];
  private jobStartedAt = 0;
  private enginePorts: number[] = [];
  private readonly enginePortOf = new Map<string, number>();
  private ports!: { http: Record<ControlPlaneService, number>; router: number; rendezvous: number };
  private readonly job: ChaosJob;
  /** The machines cut off right now (network-namespace hosts only). */
  private readonly partitions: Partitions;
  /** Lines of the machines' logs, to those waiting for one (a fault timed to what an agent does). */
  private readonly lineWatchers = new Set<(machineId: string, line: string) => void>();
  /** Between the services and PostgreSQL (degraded-faults.ts). */
  private postgresProxy?: LatencyProxy;
  /** The agents' clock preload (degraded-faults.ts), null without a build. */
  private readonly clockPreload = skewedClockPreload();

  constructor(
    private readonly infra: PrivateInfra,
    private readonly options: SystemChaosOptions & { job: ChaosJob },
    private readonly schedule: ScheduledFault[],
    private readonly hosts: NetnsHosts | null,
  ) {
    this.job = options.job;
    this.partitions = new Partitions(hosts);
    this.jobId = `chaos-s${options.seed}-${randomUUID().slice(0, 6)}`;
    this.logDir = join(infra.dir, 'logs');
    this.stateDir = join(infra.dir, 'job');
    mkdirSync(this.logDir, { recursive: true });
    mkdirSync(this.stateDir, { recursive: true });
  }

  private get progress() {
    return this.options.progress;
  }

  private get timings() {
    return campaignTimings(this.options.timeScale ?? DEFAULT_TIME_SCALE);
  }

  private url(service: ControlPlaneService): string {
    return `http://127.0.0.1:${this.ports.http[service]}`;
  }

  /** Where machines reach the control plane: the bridge's address when they are namespaces. */
  private get reachable(): string {
    return this.hosts?.gateway ?? '127.0.0.1';
  }

  /** What the job is told about this run (chaos-job.ts). */
  private get ctx(): ChaosJobContext {
    return {
      jobId: this.jobId,
      seed: this.options.seed,
      steps: this.options.steps,
      stateDir: this.stateDir,
      logDir: this.logDir,
      requestManagerUrl: `http://${this.reachable}:${this.ports.http['request-manager']}`,
      routerUrl: `http://${this.reachable}:${this.ports.router}`,
      engineUrl: (machineId) => `http://${this.hostAddress(machineId)}:${this.enginePort(machineId)}`,
      hostAddress: (machineId) => this.hostAddress(machineId),
      netns: this.hosts !== null,
    };
  }

  private hostAddress(machineId: string): string {
    return this.hosts ? this.hosts.add(machineId).address : '127.0.0.1';
  }

  /** Every machine may become a rollout (a faulty trainer's refill is one): each gets an engine port of its own. */
  private enginePort(machineId: string): number {
    let port = this.enginePortOf.get(machineId);
    if (port === undefined) {
      port = this.enginePorts.shift();
      if (port === undefined) throw new Error('out of engine ports');
      this.enginePortOf.set(machineId, port);
    }
    return port;
  }

  async execute(): Promise<SystemScorecard> {
    const deadline = Date.now() + this.options.deadlineSeconds * 1000;
    await this.bringUp();
    await this.startJob();
    this.progress(
      `${this.job.name} job ${this.jobId}: ${this.options.steps} steps, ${this.job.trainers} trainer ranks, ${this.job.rollouts} rollouts` +
        `${this.hosts ? ' on network-namespace hosts' : ''}; waiting for step 1 (faults start after the first iteration)`,
    );
    await this.until('step 1 committed', () => this.committed() >= 1, Math.max(0, deadline - Date.now()));

    let lastCommitted = this.committed();
    for (const fault of this.schedule) {
      if (Date.now() > deadline) {
        this.notes.push(`deadline reached before fault ${fault.index + 1}`);
        break;
      }
      if (this.committed() >= this.options.steps) {
        this.notes.push(`the job finished before fault ${fault.index + 1} of ${this.schedule.length}: run more steps (--steps)`);
        break;
      }
      if (fault.overlaps) {
        // Drawn on purpose: on top of the previous fault, while its recovery may still be open.
        await sleep(Math.min(fault.afterSeconds, 2) * 1000);
        await this.inject(fault, null);
        continue;
      }
      const settled = await this.settle(lastCommitted, Math.min(240_000 + this.job.restartSeconds * 1000, Math.max(0, deadline - Date.now())));
      if (!settled.ok) this.progress(`  (not settled after ${Math.round(settled.ms / 1000)} s: ${settled.why}; injecting anyway)`);
      await sleep(fault.afterSeconds * 1000);
      lastCommitted = this.committed();
      // Said in the fault's row: a fault on an unsettled system overlaps what came before (README: each waits).
      await this.inject(fault, settled.ok ? null : `before the system settled: ${settled.why}`);
    }
    this.progress(`${this.injected.length} faults injected; waiting for the job to finish`);
    const trained = await this.until('every step committed', () => this.committed() >= this.options.steps, Math.max(0, deadline - Date.now())).catch(
      () => false,
    );
    // The control plane's ETTR and the processes' over the same window, read as the last step commits:
    // after it the job's machines count differently in each (idle in the control plane's view, gone in
    // the processes' once the trainer exits).
    const ettr = await this.ettrAtEnd();
    const finished =
      trained !== false &&
      (await this.until('the job finished', () => this.agentLoopsExit !== undefined, Math.max(0, deadline - Date.now())).catch(() => false));
    const jobSeconds = Math.round((Date.now() - this.jobStartedAt) / 1000);
    // Recoveries still open (a fault late in the run) are given their time to complete.
    await this.until('every recovery completed', () => this.openRecoveries().length === 0, 120_000 + this.job.restartSeconds * 1000).catch(() => undefined);
    await sleep(3_000);
    return this.scorecard(finished !== false, jobSeconds, ettr);
  }

  // ── bring-up ────────────────────────────────────────────────────────────────────────────────

  private async bringUp(): Promise<void> {
    const p = this.progress;
    p(`private broker and PostgreSQL in ${this.infra.dir}`);
    this.infra.startKafka();
    this.infra.startPostgres();
    // The services reach PostgreSQL through a relay the slow-postgres fault can slow (degraded-faults.ts).
    const database = new URL(this.infra.databaseUrl);
    this.postgresProxy = new LatencyProxy({ host: database.hostname, port: Number(database.port || 5432) });
    database.hostname = '127.0.0.1';
    database.port = String(await this.postgresProxy.listen());
    const [detector, controller, requestManager, rolloutManager, weightRegistry, router, rendezvous, ...engines] = await freePorts(7 + 40);
    this.ports = {
      http: { detector, controller, 'request-manager': requestManager, 'rollout-manager': rolloutManager, 'weight-registry': weightRegistry },
      router,
      rendezvous,
    };
    this.enginePorts = engines;
    const topicPrefix = `syschaos-${randomUUID().slice(0, 8)}.`;
    const common: NodeJS.ProcessEnv = {
      KAFKA_BROKERS: this.infra.brokers.join(','),
      DATABASE_URL: database.toString(),
      ROBUSTRL_TOPIC_PREFIX: topicPrefix,
      OTEL_SDK_DISABLED: 'true',
      ROBUSTRL_ORCHESTRATOR: 'none',
      NO_COLOR: '1',
    };
    this.bus = new KafkaBus({ brokers: this.infra.brokers, clientId: 'system-chaos', topicPrefix, logger: quiet });
    await this.bus.ensureTopics();

    // The machine host: agents as processes, served to the controller as its orchestrator over HTTP.
    this.supervisor = new LocalProcessSupervisor({
      stopGraceMs: 2_000,
      output: (machineId, line) => this.machineLine(machineId, line),
      launch: (m) => {
        const env = this.agentEnv(m, common);
        return this.hosts
          ? { ...this.hosts.wrap(this.hosts.add(m.machineId).name, process.execPath, [AGENT_MAIN]), env }
          : { command: process.execPath, args: [AGENT_MAIN], env };
      },
    });
    const orchestrator = new PartitionedOrchestrator(this.supervisor, this.partitions, (line) => this.progress(`  (${line})`));
    const served = await serveOrchestrator(orchestrator, { port: 0, host: '127.0.0.1' });
    this.orchestratorServer = served.server;

    const own: Record<ControlPlaneService, NodeJS.ProcessEnv> = {
      detector: { ROBUSTRL_DETECTOR_INPUT_LAG_TOLERANCE_SECONDS: String(this.timings.inputLagToleranceSeconds) },
      controller: {
        ROBUSTRL_ORCHESTRATOR: 'http',
        ROBUSTRL_ORCHESTRATOR_URL: served.url,
        // The product's timeout over the campaign's time scale: no setting of the campaign's own hides a stall.
        ROBUSTRL_COMMAND_TIMEOUT_SECONDS: String(this.timings.commandTimeoutSeconds),
        ROBUSTRL_RECOVERY_POLICY: this.options.policy ?? 'role-based',
      },
      'request-manager': { ROBUSTRL_TRAJECTORY_RETENTION_STEPS: '1000000' },
      'rollout-manager': {
        ROBUSTRL_ROUTER: 'on',
        ROBUSTRL_ROUTER_HOST: this.hosts ? '0.0.0.0' : '127.0.0.1',
        ...(this.hosts ? { ROBUSTRL_ROUTER_AUTH: 'none' } : {}),
        ROBUSTRL_ROUTER_PORT: String(this.ports.router),
        ROBUSTRL_JOB_ID: this.jobId,
        ROBUSTRL_REQUEST_MANAGER_URL: this.url('request-manager'),
        ROBUSTRL_MAX_STALENESS: '1',
      },
      'weight-registry': {},
    };
    // On namespace hosts the services answer on the bridge too (machines call the request manager). The
    // bridge is the run's own, reachable from its namespaces only: its APIs ask for no token there.
    const bind = this.hosts ? { ROBUSTRL_HTTP_HOST: '0.0.0.0', ROBUSTRL_HTTP_AUTH: 'none' } : {};
    for (const name of CONTROL_PLANE_SERVICES)
      this.services.set(name, new ServiceProcess(name, this.ports.http[name], { ...common, ...bind, ...own[name] }, this.logDir));
    for (const s of this.services.values()) s.start();
    await this.until('every service ready', async () => (await this.readiness()).every((c) => c === 200), 120_000);
    p('detector, controller, request manager, rollout manager (router), weight registry: ready');

    this.observer = await this.bus.subscribe({
      groupId: `system-chaos-observer-${randomUUID()}`,
      topics: [Topics.membership, Topics.verdicts, Topics.control, Topics.replies, Topics.training, Topics.trajectories, Topics.weights, Topics.telemetry],
      types: OBSERVED,
      fromBeginning: true,
      handler: async ({ message }) => {
        if (message.jobId !== this.jobId || this.eventIds.has(message.eventId)) return;
        this.eventIds.add(message.eventId);
        this.events.push(message);
        if (message.type === 'WeightVersionPublished') this.visibleAt.set(message.eventId, Date.now());
      },
    });
  }

  private agentEnv(m: MachineSpec & { jobId: string }, common: NodeJS.ProcessEnv): Record<string, string> {
    const shm = join(this.infra.dir, 'shm', m.machineId);
    mkdirSync(shm, { recursive: true });
    const host = this.hostAddress(m.machineId);
    // A machine on a host of its own does not reach the control plane's PostgreSQL (nor does one on a
    // cluster): its agent keeps what it stores in process, as the chart's agents do.
    const { DATABASE_URL, ...reachable } = common as Record<string, string>;
    return {
      // Empty, not absent: the supervisor starts agents with this process's environment underneath.
      ...(this.hosts ? { ...reachable, DATABASE_URL: '' } : { ...reachable, DATABASE_URL }),
      ROBUSTRL_JOB_ID: m.jobId,
      ROBUSTRL_MACHINE_ID: m.machineId,
      ROBUSTRL_ROLE: m.role,
      ROBUSTRL_ZONE: m.zone,
      ROBUSTRL_HARDWARE_CLASS: m.hardwareClass,
      ROBUSTRL_GPUS: '1',
      ROBUSTRL_AGENT_PORT: '0',
      ROBUSTRL_GPU_SAMPLE_SECONDS: '1',
      ROBUSTRL_STOP_GRACE_SECONDS: '1',
      ROBUSTRL_AGENT_LEASE_SECONDS: String(this.timings.leaseSeconds),
      ROBUSTRL_WEIGHTS_PORT: '0',
      ROBUSTRL_WEIGHTS_SHM_DIR: shm,
      ROBUSTRL_REQUEST_MANAGER_URL: this.ctx.requestManagerUrl,
      ROBUSTRL_RENDEZVOUS_PORT: String(this.ports.rendezvous),
      // The machine's own address: the trainer group meets at rank 0's, weights are served from it.
      ROBUSTRL_ADVERTISE_HOST: host,
      // Every launch, first or restart, takes its rank, world size and rendezvous from the agent.
      ROBUSTRL_TRAINER_WORLD_SIZE: String(this.job.trainers),
      ROBUSTRL_INFERENCE_URL: this.ctx.engineUrl(m.machineId),
      // Between namespaces UCX goes over TCP, across the veth pairs (no shared-memory shortcut).
      ...(this.hosts ? { UCX_TLS: 'tcp' } : {}),
      PYTHONUNBUFFERED: '1',
      // The agent's wall clock, which the clock-skew fault steps (skewed-clock.ts).
      ...(this.clockPreload
        ? { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${this.clockPreload}`.trim(), ROBUSTRL_CHAOS_CLOCK_FILE: this.clockFile(m.machineId) }
        : {}),
      ...this.job.agentEnv(m, this.ctx),
    };
  }

  /** The machine's clock offset (ms), read by its agent (skewed-clock.ts). */
  clockFile(machineId: string): string {
    return join(this.infra.dir, 'clocks', machineId);
  }

  private machineLine(machineId: string, line: string): void {
    for (const watcher of this.lineWatchers) watcher(machineId, line);
    let log = this.machineLogs.get(machineId);
    if (!log) this.machineLogs.set(machineId, (log = createWriteStream(join(this.logDir, `machine-${machineId}.log`), { flags: 'a' })));
    log.write(`${new Date().toISOString()} ${line}\n`);
    const trainer = /process restarted \(pid \d+\) for ([^,\s]+),/.exec(line);
    if (trainer) this.roleRestarts.push({ machineId, recoveryId: trainer[1], what: 'trainer' });
    const engine = /rollout engine restarted in place \(pid \d+\) for ([^:\s]+):/.exec(line);
    if (engine) this.roleRestarts.push({ machineId, recoveryId: engine[1], what: 'engine' });
  }

  private async startJob(): Promise<void> {
    const machines = machinesOf(this.job);
    await this.bus!.publish(
      createMessage(
        'JobStarted',
        {
          mode: 'semi-sync',
          resumedFromStep: null,
          trainerMachines: this.job.trainers,
          rolloutMachines: this.job.rollouts,
          detection: this.timings.detection,
        },
        { jobId: this.jobId, source: 'system-chaos', occurredAt: new Date().toISOString() },
      ),
    );
    this.jobStartedAt = Date.now();
    await this.supervisor!.launchJob(this.jobId, machines);
    const log = openSync(join(this.logDir, 'agent-loops.log'), 'a');
    const loops = this.job.loops(this.ctx);
    const child = spawn(loops.command, loops.args, { env: { ...process.env, ...loops.env, PYTHONUNBUFFERED: '1' }, stdio: ['ignore', log, log] });
    closeSync(log);
    child.once('exit', (code) => (this.agentLoopsExit = code));
    this.agentLoops = child;
    this.processSampler = new ObservedSampler(this.stateDir, () =>
      this.supervisor!.machines()
        .filter((m) => m.jobId === this.jobId && m.status === 'running')
        .map((m) => ({ machineId: m.machineId, agentPid: this.supervisor!.pidOf(m.machineId), engineUrl: this.ctx.engineUrl(m.machineId) })),
    );
    this.processSampler.start();
  }

  // ── faults ──────────────────────────────────────────────────────────────────────────────────

  /** What the faults of fault-injector.ts get to act on. */
  private get faultHost(): FaultHost {
    return {
      supervisor: this.supervisor!,
      services: this.services,
      infra: this.infra,
      stateDir: this.stateDir,
      jobId: this.jobId,
      events: () => this.events,
      watch: (watcher) => {
        this.lineWatchers.add(watcher);
        return () => this.lineWatchers.delete(watcher);
      },
      until: (what, condition, timeoutMs, everyMs) => this.until(what, condition, timeoutMs, everyMs),
      partitions: this.partitions,
      postgresProxy: this.postgresProxy ?? null,
      clockFile: (machineId) => this.clockFile(machineId),
      clocksSkewable: this.clockPreload !== null,
    };
  }

  private async inject(fault: ScheduledFault, unsettled: string | null): Promise<void> {
    const at = Math.round((Date.now() - this.jobStartedAt) / 1000);
    this.progress(`fault ${fault.index + 1}/${this.schedule.length} at ${at} s: ${fault.kind}${fault.overlaps ? ' (on top of the previous fault)' : ''}…`);
    let hit = await injectFault(this.faultHost, fault);
    // On top of the previous fault its targets may be down for a while (a restart, a replacement): it
    // waits for one rather than not happening.
    for (const until = Date.now() + 60_000; fault.overlaps && hit.target === 'none' && Date.now() < until;) {
      await sleep(2_000);
      hit = await injectFault(this.faultHost, fault);
    }
    const note = [hit.note, unsettled].filter(Boolean).join('; ') || undefined;
    this.injected.push({ index: fault.index, kind: fault.kind, target: hit.target, atSeconds: at, overlaps: fault.overlaps, ...(note ? { note } : {}) });
    this.progress(`  → ${hit.target}${note ? ` (${note})` : ''}`);
  }

  private openRecoveries(): string[] {
    return openRecoveries(this.events);
  }

  /** Settled: every service ready, no recovery open, every machine up, and a step committed since the last fault. */
  private async settle(committedBefore: number, timeoutMs: number): Promise<{ ok: boolean; ms: number; why: string }> {
    const started = Date.now();
    let why = '';
    const ok = await this.until(
      'settled',
      async () => {
        const codes = await this.readiness();
        const open = this.openRecoveries();
        const up = this.supervisor!.machines().filter((m) => m.jobId === this.jobId && m.status === 'running').length;
        const all = this.job.trainers + this.job.rollouts;
        const moved = this.committed() > committedBefore || this.committed() >= this.options.steps;
        why = [
          codes.every((c) => c === 200) ? '' : `services ${CONTROL_PLANE_SERVICES.filter((_, i) => codes[i] !== 200).join(', ')} not ready`,
          open.length ? `recoveries open: ${open.join(', ')}` : '',
          up >= all ? '' : `${up} of ${all} machines up`,
          moved ? '' : 'no step committed since the last fault',
        ]
          .filter(Boolean)
          .join('; ');
        return why === '';
      },
      timeoutMs,
    ).catch(() => false);
    return { ok: ok !== false, ms: Date.now() - started, why };
  }

  // ── the end ─────────────────────────────────────────────────────────────────────────────────

  private async ettrAtEnd(): Promise<EttrAtEnd> {
    // A controller killed late in the run may still be rebuilding its views from the topics: asked again.
    const url = `${this.url('controller')}/v1/jobs/${encodeURIComponent(this.jobId)}/ettr`;
    const reported = await this.until(
      'the controller to report the ETTR',
      () => getJson<{ ettr: number; summary: string; downtimeLedger?: LedgerRow[] }>(url).catch(() => undefined),
      120_000,
      2_000,
    ).catch((err: unknown): { ettr: number | null; summary: string; downtimeLedger?: LedgerRow[] } => ({
      ettr: null,
      summary: `ETTR not read: ${String(err)}`,
    }));
    await this.processSampler?.stop();
    return {
      ettr: reported.ettr,
      summary: reported.summary,
      ledger: reported.downtimeLedger ?? [],
      observed: this.processSampler ? observedEttr(this.processSampler.samples, this.job) : null,
    };
  }

  private async scorecard(finished: boolean, jobSeconds: number, ettr: EttrAtEnd): Promise<SystemScorecard> {
    const observed = ettr.observed;
    const batches = await this.batches();
    // When each version became visible on the bus (this run's observer read it), not when the trainer
    // produced it: during a broker outage a trainer publishes versions nobody can see, let alone pull.
    const published = this.events
      .filter((m): m is MessageOf<'WeightVersionPublished'> => m.type === 'WeightVersionPublished')
      .map((m) => ({ version: m.data.version, at: this.visibleAt.get(m.eventId) ?? Date.parse(m.occurredAt) }));
    // What the checks read, kept with the logs: a violation is explained from these files.
    writeFileSync(join(this.infra.dir, 'events.jsonl'), this.events.map((m) => JSON.stringify(m)).join('\n') + '\n');
    writeFileSync(join(this.infra.dir, 'batches.json'), JSON.stringify(batches, null, 1));
    writeFileSync(join(this.infra.dir, 'faults.json'), JSON.stringify(this.injected, null, 1));
    if (this.processSampler) writeFileSync(join(this.infra.dir, 'observed.jsonl'), this.processSampler.samples.map((x) => JSON.stringify(x)).join('\n') + '\n');
    const jobChecks = await this.job.checks(this.ctx, {
      events: [...this.events],
      batches,
      roleRestarts: [...this.roleRestarts],
      published,
      jobSeconds,
      reportedEttr: ettr.ettr,
      observedEttr: observed,
    });
    const checks: Check[] = campaignChecks({
      finished,
      agentLoopsExit: this.agentLoopsExit,
      jobSeconds,
      committed: this.committed(),
      steps: this.options.steps,
      planned: this.schedule.length,
      injected: this.injected,
      notes: this.notes,
      jobChecks,
      events: this.events,
      partitions: this.partitions.spans,
      // A grace of the detection window after the heal: a verdict reached then is the partition's.
      partitionGraceMs: (this.timings.detection.agentSilentWindowSeconds + this.timings.detection.probeTimeoutSeconds) * 2000,
    });
    const { recoveries, decisionsByRule } = tallyDecisions(this.events);
    return {
      seed: this.options.seed,
      job: this.job.name,
      hosts: this.hosts ? 'netns' : 'shared',
      policy: this.options.policy ?? 'role-based',
      jobId: this.jobId,
      jobSummary: this.job.summary(this.ctx),
      planned: this.schedule.length,
      injected: [...this.injected],
      jobSeconds,
      stepsCommitted: this.committed(),
      recoveries,
      decisionsByRule,
      retrainedSteps: this.job.retrainedSteps(this.ctx),
      regeneratedTrajectories: this.events.filter((m) => m.type === 'TrajectoryRestartedFromPrompt').length,
      evaluations: this.job.evaluations(this.ctx),
      ettr: ettr.ettr,
      observedEttr: observed?.ettr ?? null,
      downtime: ettr.summary,
      classes: classScorecard(
        this.injected.map((f) => ({ kind: f.kind, target: f.target, at: this.jobStartedAt + f.atSeconds * 1000 })),
        this.events,
        ettr.ledger,
      ),
      checks,
      ok: checks.every((c) => c.ok),
      runDir: this.infra.dir,
    };
  }

  private async batches(): Promise<StoredBatch[]> {
    const out: StoredBatch[] = [];
    const base = `${this.url('request-manager')}/v1/jobs/${encodeURIComponent(this.jobId)}/batches`;
    for (let step = 1; step <= this.options.steps; step++) {
      const progress = await getJson<{ total: number }>(`${base}/step-${step}`).catch(() => null);
      const completed = await getJson<{ trajectories: TrajectoryWithTurns[]; samples?: StoredBatch['samples'] }>(
        `${base}/step-${step}/completed?currentWeightVersion=${step - 1}&maxStaleness=1000000`,
      ).catch(() => null);
      if (progress && completed) out.push({ step, total: progress.total, completed: completed.trajectories, samples: completed.samples });
    }
    return out;
  }

  async teardown(): Promise<void> {
    await this.processSampler?.stop();
    this.agentLoops?.kill('SIGKILL');
    await this.supervisor?.close().catch(() => undefined);
    await new Promise<void>((done) => (this.orchestratorServer ? this.orchestratorServer.close(() => done()) : done()));
    await Promise.all([...this.services.values()].map((s) => s.terminate().catch(() => undefined)));
    await this.observer?.close().catch(() => undefined);
    await this.bus?.close().catch(() => undefined);
    await this.postgresProxy?.close().catch(() => undefined);
    await Promise.all([...this.machineLogs.values()].map((log) => new Promise((done) => log.end(done))));
  }

  // ── helpers ─────────────────────────────────────────────────────────────────────────────────

  private committed(): number {
    return this.job.committed(this.ctx);
  }

  private readiness(): Promise<number[]> {
    return Promise.all(CONTROL_PLANE_SERVICES.map((name) => this.services.get(name)!.readiness()));
  }

  private async until<T>(what: string, condition: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs: number, everyMs = 500): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await condition();
      if (value !== undefined && value !== false) return value;
      if (Date.now() > deadline) throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}`);
      await sleep(everyMs);
    }
  }
}
