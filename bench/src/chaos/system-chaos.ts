import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, createWriteStream, existsSync, mkdirSync, openSync, readFileSync, WriteStream, writeFileSync } from 'node:fs';
import { request, Server } from 'node:http';
import { join, resolve } from 'node:path';
import { descendantsOf, signalAll } from '@robustrl/agent';
import { BusLogger, KafkaBus, Subscription } from '@robustrl/bus';
import { createMessage, MessageOf, MessageType, RobustrlMessage, Topics, TrajectoryWithTurns } from '@robustrl/contracts';
import { LocalProcessSupervisor, MachineSpec, serveOrchestrator } from '@robustrl/orchestrator';
import { CONTROL_PLANE_SERVICES, ControlPlaneService, FaultKind, faultSchedule, pickOf, ScheduledFault } from './fault-schedule';
import { freePorts, PrivateInfra, ServiceProcess } from './private-infra';
import { CampaignFacts, Check, checkInvariants, JobShape, LedgerRecord, RoleRestart, StoredBatch } from './system-invariants';

/**
 * The whole-system chaos campaign (issue 14; `npm run chaos`, a short version in
 * test/e2e/system-chaos.int.spec.ts): the six parts of robustrl as a deployment runs them — a broker
 * and a PostgreSQL server of the run's own, the detector, controller (its orchestrator over HTTP),
 * request manager, rollout manager (the router in front of the engines) and weight registry as their
 * own processes, and one agent process per machine started by a machine host (the local process
 * supervisor served over HTTP, the controller's orchestrator). The agents run the reference job of
 * clients/python: two trainer ranks and four rollout engines, semi-synchronous, tens of steps, its
 * agent loops generating every step's trajectories through the router.
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
}

export const DEFAULT_SYSTEM_CHAOS: Omit<SystemChaosOptions, 'progress' | 'seed'> = {
  faults: 20,
  steps: 150,
  deadlineSeconds: 1800,
  keep: false,
};

/** The reference job's shape: small enough for one machine, every path of a real job walked. */
const JOB = { batchSize: 8, toolRounds: 2, maxStaleness: 1, trainSeconds: 1, tokensPerReply: 8, tokenSeconds: 0.01, toolSeconds: 0.05, concurrency: 4 };

const DETECTION = {
  trainerIdleWindowSeconds: 15,
  rolloutSilentWindowSeconds: 10,
  agentSilentWindowSeconds: 4,
  probeTimeoutSeconds: 3,
  resumeGraceSeconds: 10,
};

const REPO_ROOT = resolve(__dirname, '..', '..', '..');
const REFERENCE = join(REPO_ROOT, 'clients', 'python', 'robustrl_reference.py');
const AGENT_MAIN = join(REPO_ROOT, 'services', 'agent', 'dist', 'main.js');

export interface InjectedFault {
  index: number;
  kind: FaultKind;
  target: string;
  /** Seconds since the job started. */
  atSeconds: number;
  note?: string;
}

export interface SystemScorecard {
  seed: number;
  jobId: string;
  planned: number;
  injected: InjectedFault[];
  jobSeconds: number;
  stepsCommitted: number;
  recoveries: Record<string, number>;
  decisionsByRule: Record<string, number>;
  ettr: number | null;
  downtime: string;
  checks: Check[];
  ok: boolean;
  runDir: string;
}

const quiet: BusLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the campaign watches on the bus (every type of the job's control story, none of the telemetry). */
const OBSERVED: MessageType[] = [
  'JobStarted',
  'MachineRegistered',
  'MachineRoleChanged',
  'MachineDeregistered',
  'FaultSuspected',
  'FaultConfirmed',
  'SuspicionCleared',
  'DetectionPaused',
  'DetectionResumed',
  'RecoveryDecided',
  'RestartTrainerGroup',
  'PromoteRolloutToTrainer',
  'ReplaceMachine',
  'RestartRolloutEngine',
  'RestartTask',
  'RecoveryCommandSucceeded',
  'RecoveryCommandFailed',
  'RecoveryCompleted',
  'CheckpointSaved',
  'TrainingStepCompleted',
  'TrajectoryRestartedFromPrompt',
  'TrajectoriesReassigned',
  'WeightVersionPublished',
];

export async function runSystemChaos(options: SystemChaosOptions): Promise<SystemScorecard> {
  const { progress } = options;
  const schedule = faultSchedule({ seed: options.seed, faults: options.faults, weights: options.weights });
  const infra = await PrivateInfra.create();
  const run = new CampaignRun(infra, options, schedule);
  const cleanUp = async () => {
    await run.teardown();
    if (options.keep) progress(`kept ${infra.dir} (logs in ${join(infra.dir, 'logs')})`);
    else infra.destroy();
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
  private ports!: { http: Record<ControlPlaneService, number>; router: number; rendezvous: number };

  constructor(
    private readonly infra: PrivateInfra,
    private readonly options: SystemChaosOptions,
    private readonly schedule: ScheduledFault[],
  ) {
    this.jobId = `chaos-s${options.seed}-${randomUUID().slice(0, 6)}`;
    this.logDir = join(infra.dir, 'logs');
    this.stateDir = join(infra.dir, 'job');
    mkdirSync(this.logDir, { recursive: true });
    mkdirSync(this.stateDir, { recursive: true });
  }

  private get progress() {
    return this.options.progress;
  }

  private url(service: ControlPlaneService): string {
    return `http://127.0.0.1:${this.ports.http[service]}`;
  }

  async execute(): Promise<SystemScorecard> {
    const deadline = Date.now() + this.options.deadlineSeconds * 1000;
    await this.bringUp();
    await this.startJob();
    this.progress(`job ${this.jobId}: ${this.options.steps} steps, 2 trainer ranks, 4 rollouts; waiting for step 1 (faults start after the first iteration)`);
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
      const settled = await this.settle(lastCommitted, Math.min(240_000, Math.max(0, deadline - Date.now())));
      if (!settled.ok) this.progress(`  (not settled after ${Math.round(settled.ms / 1000)} s: ${settled.why}; injecting anyway)`);
      await sleep(fault.afterSeconds * 1000);
      lastCommitted = this.committed();
      await this.inject(fault);
    }
    this.progress(`${this.injected.length} faults injected; waiting for the job to finish`);
    const finished = await this.until(
      'the job finished',
      () => this.committed() >= this.options.steps && this.agentLoopsExit !== undefined,
      Math.max(0, deadline - Date.now()),
    ).catch(() => false);
    const jobSeconds = Math.round((Date.now() - this.jobStartedAt) / 1000);
    // Recoveries still open (a fault late in the run) are given their time to complete.
    await this.until('every recovery completed', () => this.openRecoveries().length === 0, 120_000).catch(() => undefined);
    await sleep(3_000);
    return this.scorecard(finished !== false, jobSeconds);
  }

  // ── bring-up ────────────────────────────────────────────────────────────────────────────────

  private async bringUp(): Promise<void> {
    const p = this.progress;
    p(`private broker and PostgreSQL in ${this.infra.dir}`);
    this.infra.startKafka();
    this.infra.startPostgres();
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
      DATABASE_URL: this.infra.databaseUrl,
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
      launch: (m) => ({ command: process.execPath, args: [AGENT_MAIN], env: this.agentEnv(m, common) }),
    });
    const served = await serveOrchestrator(this.supervisor, { port: 0, host: '127.0.0.1' });
    this.orchestratorServer = served.server;

    const own: Record<ControlPlaneService, NodeJS.ProcessEnv> = {
      detector: {},
      controller: { ROBUSTRL_ORCHESTRATOR: 'http', ROBUSTRL_ORCHESTRATOR_URL: served.url, ROBUSTRL_COMMAND_TIMEOUT_SECONDS: '30' },
      'request-manager': { ROBUSTRL_TRAJECTORY_RETENTION_STEPS: '1000000' },
      'rollout-manager': {
        ROBUSTRL_ROUTER: 'on',
        ROBUSTRL_ROUTER_HOST: '127.0.0.1',
        ROBUSTRL_ROUTER_PORT: String(this.ports.router),
        ROBUSTRL_JOB_ID: this.jobId,
        ROBUSTRL_REQUEST_MANAGER_URL: this.url('request-manager'),
        ROBUSTRL_MAX_STALENESS: String(JOB.maxStaleness),
      },
      'weight-registry': {},
    };
    for (const name of CONTROL_PLANE_SERVICES)
      this.services.set(name, new ServiceProcess(name, this.ports.http[name], { ...common, ...own[name] }, this.logDir));
    for (const s of this.services.values()) s.start();
    await this.until('every service ready', async () => (await this.readiness()).every((c) => c === 200), 120_000);
    p('detector, controller, request manager, rollout manager (router), weight registry: ready');

    this.observer = await this.bus.subscribe({
      groupId: `system-chaos-observer-${randomUUID()}`,
      topics: [Topics.membership, Topics.verdicts, Topics.control, Topics.replies, Topics.training, Topics.trajectories, Topics.weights],
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
    const env: Record<string, string> = {
      ...(common as Record<string, string>),
      ROBUSTRL_JOB_ID: m.jobId,
      ROBUSTRL_MACHINE_ID: m.machineId,
      ROBUSTRL_ROLE: m.role,
      ROBUSTRL_ZONE: m.zone,
      ROBUSTRL_HARDWARE_CLASS: m.hardwareClass,
      ROBUSTRL_GPUS: '1',
      ROBUSTRL_AGENT_PORT: '0',
      ROBUSTRL_TRAINER_COMMAND: `${python()} ${REFERENCE} trainer`,
      ROBUSTRL_ROLLOUT_COMMAND: `${python()} ${REFERENCE} engine`,
      ROBUSTRL_GPU_SOURCE: 'emulated',
      ROBUSTRL_GPU_SAMPLE_SECONDS: '1',
      ROBUSTRL_STOP_GRACE_SECONDS: '1',
      ROBUSTRL_WEIGHTS_PORT: '0',
      ROBUSTRL_WEIGHTS_SHM_DIR: shm,
      ROBUSTRL_REQUEST_MANAGER_URL: this.url('request-manager'),
      ROBUSTRL_RENDEZVOUS_PORT: String(this.ports.rendezvous),
      PYTHONUNBUFFERED: '1',
      ...this.referenceEnv(),
    };
    // Every machine may become a rollout (a faulty trainer's refill is one): each gets an engine port of its own.
    const port = this.enginePorts.shift();
    if (port !== undefined) env.ROBUSTRL_INFERENCE_URL = `http://127.0.0.1:${port}`;
    if (m.role === 'trainer') {
      const rank = m.machineId === 'trainer-0' ? 0 : 1;
      Object.assign(env, { RANK: String(rank), WORLD_SIZE: '2', MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(this.ports.rendezvous) });
    }
    return env;
  }

  private referenceEnv(): Record<string, string> {
    return {
      ROBUSTRL_REF_STEPS: String(this.options.steps),
      ROBUSTRL_REF_BATCH_SIZE: String(JOB.batchSize),
      ROBUSTRL_REF_TOOL_ROUNDS: String(JOB.toolRounds),
      ROBUSTRL_REF_TOKENS_PER_REPLY: String(JOB.tokensPerReply),
      ROBUSTRL_REF_TOKEN_SECONDS: String(JOB.tokenSeconds),
      ROBUSTRL_REF_TOOL_SECONDS: String(JOB.toolSeconds),
      ROBUSTRL_REF_TRAIN_SECONDS: String(JOB.trainSeconds),
      ROBUSTRL_REF_MAX_STALENESS: String(JOB.maxStaleness),
      ROBUSTRL_REF_CONCURRENCY: String(JOB.concurrency),
      ROBUSTRL_REF_STATE_DIR: this.stateDir,
    };
  }

  private machineLine(machineId: string, line: string): void {
    let log = this.machineLogs.get(machineId);
    if (!log) this.machineLogs.set(machineId, (log = createWriteStream(join(this.logDir, `machine-${machineId}.log`), { flags: 'a' })));
    log.write(`${new Date().toISOString()} ${line}\n`);
    const trainer = /process restarted \(pid \d+\) for ([^,\s]+),/.exec(line);
    if (trainer) this.roleRestarts.push({ machineId, recoveryId: trainer[1], what: 'trainer' });
    const engine = /rollout engine restarted in place \(pid \d+\) for ([^:\s]+):/.exec(line);
    if (engine) this.roleRestarts.push({ machineId, recoveryId: engine[1], what: 'engine' });
  }

  private async startJob(): Promise<void> {
    const machines: MachineSpec[] = [
      ...['trainer-0', 'trainer-1'].map((machineId) => ({ machineId, role: 'trainer' as const, zone: 'az-1', hardwareClass: 'cpu-chaos' })),
      ...[0, 1, 2, 3].map((i) => ({ machineId: `rollout-${i}`, role: 'rollout' as const, zone: 'az-1', hardwareClass: 'cpu-chaos' })),
    ];
    await this.bus!.publish(
      createMessage(
        'JobStarted',
        { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 2, rolloutMachines: 4, detection: DETECTION },
        { jobId: this.jobId, source: 'system-chaos', occurredAt: new Date().toISOString() },
      ),
    );
    this.jobStartedAt = Date.now();
    await this.supervisor!.launchJob(this.jobId, machines);
    const log = openSync(join(this.logDir, 'agent-loops.log'), 'a');
    const loops = spawn(python(), [REFERENCE, 'agent-loops'], {
      env: {
        ...process.env,
        ...this.referenceEnv(),
        ROBUSTRL_JOB_ID: this.jobId,
        ROBUSTRL_REF_ROUTER_URL: `http://127.0.0.1:${this.ports.router}`,
        ROBUSTRL_REQUEST_MANAGER_URL: this.url('request-manager'),
        PYTHONUNBUFFERED: '1',
      },
      stdio: ['ignore', log, log],
    });
    closeSync(log);
    loops.once('exit', (code) => (this.agentLoopsExit = code));
    this.agentLoops = loops;
  }

  // ── faults ──────────────────────────────────────────────────────────────────────────────────

  private async inject(fault: ScheduledFault): Promise<void> {
    const at = Math.round((Date.now() - this.jobStartedAt) / 1000);
    const record = (target: string, note?: string) => {
      this.injected.push({ index: fault.index, kind: fault.kind, target, atSeconds: at, ...(note ? { note } : {}) });
      this.progress(`fault ${fault.index + 1}/${this.schedule.length} at ${at} s: ${fault.kind} → ${target}${note ? ` (${note})` : ''}`);
    };
    const down = fault.downSeconds * 1000;
    switch (fault.kind) {
      case 'kill-trainer-process':
      case 'kill-engine-process': {
        const role = fault.kind === 'kill-trainer-process' ? 'trainer' : 'rollout';
        const target = pickOf(this.machinesWithRoleProcess(role), fault.pick);
        if (!target) return record('none', `no ${role} with a running process`);
        this.killRoleProcess(target);
        return record(target);
      }
      case 'kill-trainer-machine':
      case 'kill-rollout-machine': {
        const role = fault.kind === 'kill-trainer-machine' ? 'trainer' : 'rollout';
        const target = pickOf(this.runningMachines(role), fault.pick);
        if (!target) return record('none', `no running ${role} machine`);
        this.supervisor!.killMachine(target, 'SIGKILL');
        return record(target);
      }
      case 'kill-service': {
        const name = pickOf(CONTROL_PLANE_SERVICES, fault.pick)!;
        const service = this.services.get(name)!;
        await service.kill9();
        record(name, `down ${fault.downSeconds} s`);
        await sleep(down);
        service.start();
        return;
      }
      case 'kill-controller-mid-recovery': {
        // A machine loss: its recovery (a replacement, or a warm standby) stays open for seconds, where a
        // process restart completes within half a second, too soon to be caught in the middle.
        const before = new Set(this.openRecoveries());
        const role = fault.pick < 0.5 ? 'rollout' : 'trainer';
        const target = pickOf(this.runningMachines(role), fault.pick < 0.5 ? fault.pick * 2 : fault.pick * 2 - 1);
        if (!target) return record('controller', `no running ${role} machine to lose first`);
        this.supervisor!.killMachine(target, 'SIGKILL');
        const recovery = await this.until('a recovery decided', () => this.openRecoveries().find((id) => !before.has(id)), 45_000, 50).catch(() => undefined);
        const controller = this.services.get('controller')!;
        await controller.kill9();
        const stillOpen = recovery !== undefined && this.openRecoveries().includes(recovery);
        record(
          'controller',
          recovery
            ? `${target} lost first; killed ${stillOpen ? 'while' : 'just after'} ${recovery} ${stillOpen ? 'was open' : 'completed'}, down ${fault.downSeconds} s`
            : `no recovery opened within 45 s of losing ${target}`,
        );
        await sleep(down);
        controller.start();
        return;
      }
      case 'restart-broker':
        this.infra.stopKafka();
        record('broker', `down ${fault.downSeconds} s`);
        await sleep(down);
        this.infra.startKafka();
        return;
      case 'restart-postgres':
        this.infra.stopPostgres();
        record('postgres', `down ${fault.downSeconds} s`);
        await sleep(down);
        this.infra.startPostgres();
        return;
    }
  }

  /** Kill -9 of the role process tree under the machine's agent; the agent itself stays. */
  private killRoleProcess(machineId: string): void {
    const agent = this.supervisor!.pidOf(machineId);
    if (agent === undefined) return;
    signalAll(descendantsOf(agent), 'SIGKILL');
  }

  /** Machines whose current role (by the events) is `role` and whose agent runs; a stable order. */
  private runningMachines(role: 'trainer' | 'rollout'): string[] {
    const roles = new Map<string, string | null>();
    for (const m of this.events) {
      if (m.type === 'MachineRegistered') roles.set(m.data.machineId, (m as MessageOf<'MachineRegistered'>).data.role);
      if (m.type === 'MachineRoleChanged') roles.set(m.data.machineId, (m as MessageOf<'MachineRoleChanged'>).data.to);
      if (m.type === 'MachineDeregistered') roles.set(m.data.machineId, null);
    }
    return this.supervisor!.machines()
      .filter((m) => m.jobId === this.jobId && m.status === 'running' && roles.get(m.machineId) === role)
      .map((m) => m.machineId)
      .sort();
  }

  private machinesWithRoleProcess(role: 'trainer' | 'rollout'): string[] {
    return this.runningMachines(role).filter((id) => {
      const pid = this.supervisor!.pidOf(id);
      return pid !== undefined && descendantsOf(pid).length > 0;
    });
  }

  /** Recoveries decided (other than report-only) and not completed. */
  private openRecoveries(): string[] {
    const open = new Set<string>();
    for (const m of this.events) {
      if (m.type === 'RecoveryDecided' && (m as MessageOf<'RecoveryDecided'>).data.action !== 'report-only') open.add(m.data.recoveryId);
      if (m.type === 'RecoveryCompleted') open.delete(m.data.recoveryId);
    }
    return [...open];
  }

  /** Settled: every service ready, no recovery open, six machines up, and a step committed since the last fault. */
  private async settle(committedBefore: number, timeoutMs: number): Promise<{ ok: boolean; ms: number; why: string }> {
    const started = Date.now();
    let why = '';
    const ok = await this.until(
      'settled',
      async () => {
        const codes = await this.readiness();
        const open = this.openRecoveries();
        const up = this.supervisor!.machines().filter((m) => m.jobId === this.jobId && m.status === 'running').length;
        const moved = this.committed() > committedBefore || this.committed() >= this.options.steps;
        why = [
          codes.every((c) => c === 200) ? '' : `services ${CONTROL_PLANE_SERVICES.filter((_, i) => codes[i] !== 200).join(', ')} not ready`,
          open.length ? `recoveries open: ${open.join(', ')}` : '',
          up === 6 ? '' : `${up} of 6 machines up`,
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

  private async scorecard(finished: boolean, jobSeconds: number): Promise<SystemScorecard> {
    const job: JobShape = { steps: this.options.steps, batchSize: JOB.batchSize, toolRounds: JOB.toolRounds, maxStaleness: JOB.maxStaleness };
    const facts: CampaignFacts = {
      job,
      ledger: readLedger(this.stateDir),
      batches: await this.batches(),
      events: [...this.events],
      roleRestarts: [...this.roleRestarts],
      // When each version became visible on the bus (this run's observer read it), not when the trainer
      // produced it: during a broker outage a trainer publishes versions nobody can see, let alone pull.
      published: this.events
        .filter((m): m is MessageOf<'WeightVersionPublished'> => m.type === 'WeightVersionPublished')
        .map((m) => ({ version: m.data.version, at: this.visibleAt.get(m.eventId) ?? Date.parse(m.occurredAt) })),
    };
    // What the checks read, kept with the logs: a violation is explained from these files.
    writeFileSync(join(this.infra.dir, 'events.jsonl'), this.events.map((m) => JSON.stringify(m)).join('\n') + '\n');
    writeFileSync(join(this.infra.dir, 'batches.json'), JSON.stringify(facts.batches, null, 1));
    writeFileSync(join(this.infra.dir, 'faults.json'), JSON.stringify(this.injected, null, 1));
    const checks: Check[] = [
      {
        what: 'the job finished',
        ok: finished && this.agentLoopsExit === 0,
        detail: finished
          ? `in ${jobSeconds} s, agent loops exited ${this.agentLoopsExit}`
          : `not within the deadline (${this.committed()} of ${job.steps} steps committed)`,
      },
      {
        what: `${this.schedule.length} faults injected`,
        ok: this.injected.filter((f) => f.target !== 'none').length === this.schedule.length,
        detail: `${this.injected.filter((f) => f.target !== 'none').length} injected${this.notes.length ? `; ${this.notes.join('; ')}` : ''}`,
      },
      ...checkInvariants(facts),
    ];
    const recoveries: Record<string, number> = {};
    const decisionsByRule: Record<string, number> = {};
    for (const m of this.events) {
      if (m.type === 'RecoveryCompleted') {
        const o = (m as MessageOf<'RecoveryCompleted'>).data.outcome;
        recoveries[o] = (recoveries[o] ?? 0) + 1;
      }
      if (m.type === 'RecoveryDecided') {
        const d = (m as MessageOf<'RecoveryDecided'>).data;
        const key = `${d.action} (${d.rule})`;
        decisionsByRule[key] = (decisionsByRule[key] ?? 0) + 1;
      }
    }
    const ettr = await getJson<{ ettr: number; summary: string }>(`${this.url('controller')}/v1/jobs/${encodeURIComponent(this.jobId)}/ettr`).catch(
      (err: unknown) => ({ ettr: null, summary: `ETTR not read: ${String(err)}` }),
    );
    return {
      seed: this.options.seed,
      jobId: this.jobId,
      planned: this.schedule.length,
      injected: [...this.injected],
      jobSeconds,
      stepsCommitted: this.committed(),
      recoveries,
      decisionsByRule,
      ettr: ettr.ettr,
      downtime: ettr.summary,
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
      const completed = await getJson<{ trajectories: TrajectoryWithTurns[] }>(
        `${base}/step-${step}/completed?currentWeightVersion=${step - 1}&maxStaleness=1000000`,
      ).catch(() => null);
      if (progress && completed) out.push({ step, total: progress.total, completed: completed.trajectories });
    }
    return out;
  }

  async teardown(): Promise<void> {
    this.agentLoops?.kill('SIGKILL');
    await this.supervisor?.close().catch(() => undefined);
    await new Promise<void>((done) => (this.orchestratorServer ? this.orchestratorServer.close(() => done()) : done()));
    await Promise.all([...this.services.values()].map((s) => s.terminate().catch(() => undefined)));
    await this.observer?.close().catch(() => undefined);
    await this.bus?.close().catch(() => undefined);
    await Promise.all([...this.machineLogs.values()].map((log) => new Promise((done) => log.end(done))));
  }

  // ── helpers ─────────────────────────────────────────────────────────────────────────────────

  private committed(): number {
    const steps = readLedger(this.stateDir)
      .filter((r) => r.kind === 'checkpoint')
      .map((r) => r.step ?? 0);
    return Math.max(0, ...steps);
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

function python(): string {
  return process.env.PYTHON ?? 'python3';
}

function readLedger(stateDir: string): LedgerRecord[] {
  const path = join(stateDir, 'ledger.jsonl');
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .flatMap((l) => {
      try {
        return [JSON.parse(l) as LedgerRecord];
      } catch {
        return []; // a line cut by a kill -9 mid-write
      }
    });
}

function getJson<T>(url: string): Promise<T> {
  return new Promise((done, fail) => {
    const req = request(url, { method: 'GET', timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if ((res.statusCode ?? 0) >= 300) return fail(new Error(`GET ${url}: ${res.statusCode} ${text.slice(0, 200)}`));
        try {
          done(JSON.parse(text) as T);
        } catch (err) {
          fail(err as Error);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: no answer within 10 s`)));
    req.on('error', fail);
    req.end();
  });
}

/** The scorecard as markdown. */
export function formatSystemScorecard(card: SystemScorecard): string {
  const lines = [
    `## seed ${card.seed}: ${card.ok ? 'PASS' : 'FAIL'}`,
    '',
    `job ${card.jobId}: ${card.stepsCommitted} steps committed in ${card.jobSeconds} s; ETTR ${card.ettr === null ? 'n/a' : card.ettr.toFixed(3)}`,
    '',
    `downtime: ${card.downtime}`,
    '',
    `faults injected (${card.injected.length} of ${card.planned}):`,
    '',
    '| # | at (s) | fault | target | note |',
    '|---|---|---|---|---|',
    ...card.injected.map((f) => `| ${f.index + 1} | ${f.atSeconds} | ${f.kind} | ${f.target} | ${f.note ?? ''} |`),
    '',
    'decisions (action (rule): count): ' +
      Object.entries(card.decisionsByRule)
        .map(([k, n]) => `${k}: ${n}`)
        .join(', '),
    '',
    'recoveries completed: ' +
      Object.entries(card.recoveries)
        .map(([k, n]) => `${k} ${n}`)
        .join(', '),
    '',
    '| invariant | result | detail |',
    '|---|---|---|',
    ...card.checks.map((c) => `| ${c.what} | ${c.ok ? 'ok' : '**FAIL**'} | ${c.detail.replace(/\|/g, '\\|')} |`),
  ];
  return lines.join('\n');
}
