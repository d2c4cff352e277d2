import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, createWriteStream, mkdirSync, openSync, WriteStream } from 'node:fs';
import { join } from 'node:path';
import { createMessage, RobustrlMessage } from '@robustrl/contracts';
import { MachineSpec } from '@robustrl/orchestrator';
import { NetnsHosts } from '../hosts/netns-hosts';
import { ChaosJob, ChaosJobContext, machinesOf } from './chaos-job';
import { openRecoveries, unsettled } from './campaign-view';
import { raisedStepTarget } from './step-target';
import { waitUntil } from './wait-until';
import { agentEnvOf } from './campaign-env';
import { DRAIN_GRACE_SECONDS, isPlanned } from './planned-faults';
import { CampaignPlane, planeReadiness, startCampaignPlane, stopCampaignPlane } from './campaign-plane';
import { EttrAtEnd, reportedEttr, scoreRun } from './campaign-record';
import { campaignTimings, DEFAULT_TIME_SCALE } from './campaign-settings';
import { FaultHost, injectFault } from './fault-injector';
import { skewedClockPreload } from './degraded-faults';
import { PARTITION_FAULTS, Partitions } from './partition-faults';
import { CONTROL_PLANE_SERVICES, ControlPlaneService, faultSchedule, ScheduledFault } from './fault-schedule';
import { PrivateInfra } from './private-infra';
import { ReferenceJob } from './reference-job';
import { SystemChaosOptions } from './campaign-options';
import { RoleRestart } from './system-invariants';
import { InjectedFault, SystemScorecard } from './system-scorecard';
import { observedEttr } from './observed-ettr';
import { ObservedSampler } from './observed-sampler';

export { formatSystemScorecard } from './system-scorecard';
export { DEFAULT_SYSTEM_CHAOS } from './campaign-options';
export type { SystemChaosOptions } from './campaign-options';
export { campaignTimings, DEFAULT_TIME_SCALE } from './campaign-settings';
export type { InjectedFault, SystemScorecard } from './system-scorecard';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The whole-system chaos campaign (docs/contributors/chaos.md "The whole system under faults"; `npm run chaos`, a short version in
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
 * a random gap later — or, drawn on purpose, on top of the previous one without waiting. At the end the invariants (system-invariants.ts) are checked on what the run
 * left, and the scorecard says what was injected, how the control plane answered, and what the job's
 * ETTR was.
 */
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
  /** The control plane and machine host, filled as they start (campaign-plane.ts). */
  private readonly plane: Partial<CampaignPlane> & Pick<CampaignPlane, 'services'> = { services: new Map() };
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
  /** The job's step count now: the steps asked for, raised while faults are still to come (step-target.ts). */
  private steps: number;
  private readonly enginePortOf = new Map<string, number>();
  private readonly job: ChaosJob;
  /** The machines cut off right now (network-namespace hosts only). */
  private readonly partitions: Partitions;
  /** Lines of the machines' logs, to those waiting for one (a fault timed to what an agent does). */
  private readonly lineWatchers = new Set<(machineId: string, line: string) => void>();
  /** The agents' clock preload (degraded-faults.ts), null without a build. */
  private readonly clockPreload = skewedClockPreload();

  constructor(
    private readonly infra: PrivateInfra,
    private readonly options: SystemChaosOptions & { job: ChaosJob },
    private readonly schedule: ScheduledFault[],
    private readonly hosts: NetnsHosts | null,
  ) {
    this.job = options.job;
    this.steps = options.steps;
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
    return `http://127.0.0.1:${this.plane.ports!.http[service]}`;
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
      steps: this.steps,
      stateDir: this.stateDir,
      logDir: this.logDir,
      requestManagerUrl: `http://${this.reachable}:${this.plane.ports!.http['request-manager']}`,
      routerUrl: `http://${this.reachable}:${this.plane.ports!.router}`,
      engineUrl: (machineId) => `http://${this.hostAddress(machineId)}:${this.enginePort(machineId)}`,
      hostAddress: (machineId) => this.hostAddress(machineId),
      netns: this.hosts !== null,
    };
  }

  private hostAddress(machineId: string): string {
    return this.hosts ? this.hosts.add(machineId).address : '127.0.0.1';
  }

  /**
   * Every machine may become a rollout (a faulty trainer's refill is one). On network-namespace hosts each
   * machine has an address of its own, so every engine takes the same port there, however many machines a
   * campaign replaces; on one shared host each gets a port of its own from the plane's pool.
   */
  private enginePort(machineId: string): number {
    if (this.hosts) return this.plane.enginePorts![0]!;
    let port = this.enginePortOf.get(machineId);
    if (port === undefined) {
      port = this.plane.enginePorts!.shift();
      if (port === undefined) throw new Error(`out of engine ports: ${this.enginePortOf.size} machines launched on this host, no port left for ${machineId}`);
      this.enginePortOf.set(machineId, port);
    }
    return port;
  }

  async execute(): Promise<SystemScorecard> {
    const deadline = Date.now() + this.options.deadlineSeconds * 1000;
    await this.bringUp();
    await this.startJob();
    this.progress(
      `${this.job.name} job ${this.jobId}: ${this.steps} steps, ${this.job.trainers} trainer ranks, ${this.job.rollouts} rollouts` +
        `${this.hosts ? ' on network-namespace hosts' : ''}; waiting for step 1 (faults start after the first iteration)`,
    );
    await this.until('step 1 committed', () => this.committed() >= 1, Math.max(0, deadline - Date.now()));

    const raising = setInterval(() => this.raiseSteps(), 1_000);
    try {
      await this.injectAll(deadline);
    } finally {
      clearInterval(raising);
    }
    this.progress(`${this.injected.length} faults injected; waiting for the job to finish`);
    const trained = await this.until('every step committed', () => this.committed() >= this.steps, Math.max(0, deadline - Date.now())).catch(() => false);
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

  /** The schedule, fault after fault, each on a settled system unless drawn on top of the previous one. */
  private async injectAll(deadline: number): Promise<void> {
    let lastCommitted = this.committed();
    for (const fault of this.schedule) {
      if (Date.now() > deadline) {
        this.notes.push(`deadline reached before fault ${fault.index + 1}`);
        break;
      }
      if (this.committed() >= this.steps) {
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
      // Said in the fault's row: a fault on an unsettled system overlaps what came before (docs/contributors/chaos.md: each waits).
      await this.inject(fault, settled.ok ? null : `before the system settled: ${settled.why}`);
    }
  }

  /** A job ending before its last fault is lengthened while it runs, where it can be (step-target.ts). */
  private raiseSteps(): void {
    if (!this.job.raiseSteps) return;
    const next = raisedStepTarget({
      committed: this.committed(),
      target: this.steps,
      asked: this.options.steps,
      faultsLeft: this.schedule.length - this.injected.length,
    });
    if (next === null) return;
    this.job.raiseSteps(this.ctx, next);
    this.progress(`  steps raised from ${this.steps} to ${next}: faults are still to come`);
    this.steps = next;
  }

  // ── bring-up ────────────────────────────────────────────────────────────────────────────────

  private async bringUp(): Promise<void> {
    await startCampaignPlane(
      {
        infra: this.infra,
        hosts: this.hosts,
        partitions: this.partitions,
        logDir: this.logDir,
        jobId: this.jobId,
        timings: this.timings,
        policy: this.options.policy ?? 'role-based',
        progress: this.progress,
        agentEnv: (m, common) => this.agentEnv(m, common),
        machineLine: (machineId, line) => this.machineLine(machineId, line),
        observe: (message) => {
          if (message.jobId !== this.jobId || this.eventIds.has(message.eventId)) return;
          this.eventIds.add(message.eventId);
          this.events.push(message);
          if (message.type === 'WeightVersionPublished') this.visibleAt.set(message.eventId, Date.now());
        },
      },
      this.plane,
    );
  }

  private agentEnv(m: MachineSpec & { jobId: string }, common: NodeJS.ProcessEnv): Record<string, string> {
    const shmDir = join(this.infra.dir, 'shm', m.machineId);
    mkdirSync(shmDir, { recursive: true });
    const site = {
      shmDir,
      hostAddress: this.hostAddress(m.machineId),
      onHostOfItsOwn: this.hosts !== null,
      timings: this.timings,
      requestManagerUrl: this.ctx.requestManagerUrl,
      engineUrl: this.ctx.engineUrl(m.machineId),
      rendezvousPort: this.plane.ports!.rendezvous,
      trainers: this.job.trainers,
      clock: this.clockPreload ? { preload: this.clockPreload, file: this.clockFile(m.machineId) } : null,
      // A pod's grace period, when the mix drains machines (planned-faults.ts); else SIGTERM stops an agent at once, as before.
      terminationGraceSeconds: this.schedule.some((f) => isPlanned(f.kind)) ? DRAIN_GRACE_SECONDS : 0,
    };
    return { ...agentEnvOf(m, common, site), ...this.job.agentEnv(m, this.ctx) };
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
    await this.plane.bus!.publish(
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
    await this.plane.supervisor!.launchJob(this.jobId, machines);
    const log = openSync(join(this.logDir, 'agent-loops.log'), 'a');
    const loops = this.job.loops(this.ctx);
    const child = spawn(loops.command, loops.args, { env: { ...process.env, ...loops.env, PYTHONUNBUFFERED: '1' }, stdio: ['ignore', log, log] });
    closeSync(log);
    child.once('exit', (code) => (this.agentLoopsExit = code));
    this.agentLoops = child;
    this.processSampler = new ObservedSampler(this.stateDir, () =>
      this.plane
        .supervisor!.machines()
        .filter((m) => m.jobId === this.jobId && m.status === 'running')
        .map((m) => ({ machineId: m.machineId, agentPid: this.plane.supervisor!.pidOf(m.machineId), engineUrl: this.ctx.engineUrl(m.machineId) })),
    );
    this.processSampler.start();
  }

  // ── faults ──────────────────────────────────────────────────────────────────────────────────

  /** What the faults of fault-injector.ts get to act on. */
  private get faultHost(): FaultHost {
    return {
      supervisor: this.plane.supervisor!,
      services: this.plane.services,
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
      postgresProxy: this.plane.postgresProxy ?? null,
      clockFile: (machineId) => this.clockFile(machineId),
      clocksSkewable: this.clockPreload !== null,
    };
  }

  private async inject(fault: ScheduledFault, unsettled: string | null): Promise<void> {
    const at = Math.round((Date.now() - this.jobStartedAt) / 1000);
    this.progress(
      `fault ${fault.index + 1}/${this.schedule.length} at ${at} s, step ${this.committed()} of ${this.steps}: ${fault.kind}${fault.overlaps ? ' (on top of the previous fault)' : ''}…`,
    );
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
        why = unsettled({
          services: CONTROL_PLANE_SERVICES,
          readiness: await this.readiness(),
          open: this.openRecoveries(),
          machinesUp: this.plane.supervisor!.machines().filter((m) => m.jobId === this.jobId && m.status === 'running').length,
          machines: this.job.trainers + this.job.rollouts,
          down: this.plane
            .supervisor!.machines()
            .filter((m) => m.jobId === this.jobId && m.status === 'exited')
            .map((m) => m.machineId),
          moved: this.committed() > committedBefore || this.committed() >= this.steps,
        });
        return why === '';
      },
      timeoutMs,
    ).catch(() => false);
    return { ok: ok !== false, ms: Date.now() - started, why };
  }

  // ── the end ─────────────────────────────────────────────────────────────────────────────────

  private async ettrAtEnd(): Promise<EttrAtEnd> {
    const reported = await reportedEttr(this.url('controller'), this.jobId);
    await this.processSampler?.stop();
    return { ...reported, observed: this.processSampler ? observedEttr(this.processSampler.samples, this.job) : null };
  }

  private scorecard(finished: boolean, jobSeconds: number, ettr: EttrAtEnd): Promise<SystemScorecard> {
    return scoreRun(
      {
        seed: this.options.seed,
        steps: this.steps,
        policy: this.options.policy ?? 'role-based',
        job: this.job,
        ctx: this.ctx,
        onHosts: this.hosts !== null,
        jobId: this.jobId,
        dir: this.infra.dir,
        requestManagerUrl: this.url('request-manager'),
        events: this.events,
        visibleAt: this.visibleAt,
        roleRestarts: this.roleRestarts,
        injected: this.injected,
        notes:
          this.steps > this.options.steps
            ? [...this.notes, `steps raised from ${this.options.steps} to ${this.steps} while faults were still to come`]
            : this.notes,
        planned: this.schedule.length,
        agentLoopsExit: this.agentLoopsExit,
        committed: this.committed(),
        partitions: this.partitions.spans,
        timings: this.timings,
        jobStartedAt: this.jobStartedAt,
        samples: this.processSampler?.samples ?? null,
      },
      finished,
      jobSeconds,
      ettr,
    );
  }

  async teardown(): Promise<void> {
    await this.processSampler?.stop();
    this.agentLoops?.kill('SIGKILL');
    await stopCampaignPlane(this.plane);
    await Promise.all([...this.machineLogs.values()].map((log) => new Promise((done) => log.end(done))));
  }

  // ── helpers ─────────────────────────────────────────────────────────────────────────────────

  private committed(): number {
    return this.job.committed(this.ctx);
  }

  private readiness(): Promise<number[]> {
    return planeReadiness(this.plane.services);
  }

  private until<T>(what: string, condition: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs: number, everyMs = 500): Promise<T> {
    return waitUntil(what, condition, timeoutMs, everyMs);
  }
}
