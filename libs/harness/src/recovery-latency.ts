import { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { BusLogger, KafkaBus } from '@robustrl/bus';
import { createMessage } from '@robustrl/contracts';
import { DURABLE_RELAY_TABLE } from './bare-relay-table';
import { freePorts, PrivateInfra, ServiceProcess } from './chaos/private-infra';
import { SyntheticJob } from './chaos/synthetic-job';
import { Bare, BareRoute, bareTrip, startBaseline, stopChild } from './recovery-baseline';
import { BASELINE_WARMUP, COMMAND_TIMEOUT_MS, FaultSample, RecoveryLatencyOptions, RecoveryLatencyResult, ROLLOUT_ANSWERS } from './recovery-latency-types';
import { COMMAND_TYPES, observeVerdictsAndCommands, Seen } from './recovery-observer';

export { BASELINE_WARMUP, FaultSample, RecoveryLatencyOptions, RecoveryLatencyResult, ROLLOUT_ANSWERS } from './recovery-latency-types';

const quiet: BusLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface PendingFault {
  jobId: string;
  machineId: string;
  correlationId: string;
  done: (command: Seen) => void;
}

/**
 * The run behind `npm run bench:recovery-latency` (see recovery-latency.bench.ts for what it measures
 * and why it is set up this way). Everything it starts — broker, PostgreSQL, service processes,
 * clients — is registered as it starts, so `close()` stops exactly that, at any point.
 */
export class RecoveryLatencyRun {
  private infra?: PrivateInfra;
  private readonly services: ServiceProcess[] = [];
  private readonly jobs: SyntheticJob[] = [];
  private readonly kafka: { clients: Array<{ disconnect(): Promise<void> }> } = { clients: [] };
  private agentBus?: KafkaBus;
  private signalBus?: KafkaBus;
  private bare?: Bare;
  private readonly relays: ChildProcess[] = [];
  private pending: PendingFault | null = null;
  /** FaultConfirmed and RecoveryDecided by correlation id (the fault's story). */
  private readonly verdicts = new Map<string, Seen>();
  private readonly decisions = new Map<string, Seen>();
  private topicPrefix = '';
  private partitions = 0;
  private closed = false;
  private closing?: Promise<void>;

  constructor(private readonly options: RecoveryLatencyOptions) {}

  /** Private infra, the detector and controller processes, the jobs, the observer and the baseline clients; then warm-ups. */
  async start(): Promise<void> {
    const { progress } = this.options;
    const infra = await PrivateInfra.create();
    this.infra = infra;
    const logDir = join(infra.dir, 'logs');
    mkdirSync(logDir, { recursive: true });
    progress(`private broker ${infra.brokers.join(',')} and PostgreSQL in ${infra.dir} (service logs in ${logDir})`);
    infra.startKafka();
    this.assertOpen();
    infra.startPostgres();
    this.assertOpen();
    this.topicPrefix = `bench-recovery-${randomUUID().slice(0, 8)}.`;
    const env: NodeJS.ProcessEnv = {
      KAFKA_BROKERS: infra.brokers.join(','),
      DATABASE_URL: infra.databaseUrl,
      ROBUSTRL_TOPIC_PREFIX: this.topicPrefix,
      // Commands are only consumed by the bench, not carried out (they would time out after 10 minutes).
      ROBUSTRL_ORCHESTRATOR: 'none',
      OTEL_SDK_DISABLED: 'true',
      NO_COLOR: '1',
    };
    const busOf = (clientId: string) => new KafkaBus({ brokers: infra.brokers, clientId, topicPrefix: this.topicPrefix, logger: quiet });
    // The job's telemetry and the fault signals leave through producers of their own, as on separate agents.
    this.agentBus = busOf('bench-agents');
    this.signalBus = busOf('bench-fault-signals');
    await this.agentBus.ensureTopics();
    this.assertOpen(); // interrupted meanwhile: spawn nothing close() would not see
    const ports = await freePorts(2);
    for (const [i, name] of ['detector', 'controller'].entries()) this.services.push(new ServiceProcess(name, ports[i], env, logDir));
    for (const s of this.services) s.start();
    for (const s of this.services) {
      await waitFor(
        `${s.name} ready`,
        async () => (await s.readiness()) === 200,
        120_000,
        () => this.closed,
      );
      progress(`${s.name} ready ${((Date.now() - s.startedAt) / 1000).toFixed(1)} s after its start`);
    }
    this.assertOpen();
    await this.startObserver(infra.brokers);
    this.assertOpen();
    await this.startBaseline(infra.brokers);

    const jobCount = Math.ceil(this.options.faults / this.options.faultsPerJob);
    for (let j = 0; j < jobCount; j++) {
      this.assertOpen();
      this.jobs.push(await this.readyJob());
    }
    const reporting = this.options.telemetryMs > 0 ? `reporting every ${this.options.telemetryMs} ms` : 'not reporting (telemetry off)';
    progress(
      `${jobCount} job(s) of ${this.options.trainersPerJob} trainers and ${this.options.faultsPerJob + 1} rollouts ${reporting}, each past a warm-up fault`,
    );
    for (let i = 0; i < BASELINE_WARMUP; i++) for (const route of this.bareRoutes()) await this.trip(route);
  }

  /**
   * Interleaved: a bare round trip, a pause, the bare relay chain, a pause, the single bare relay, a pause,
   * the single durable relay, a pause, a fault, a pause; `faults` times.
   */
  async measure(): Promise<RecoveryLatencyResult> {
    const { faults, progress } = this.options;
    const baselineMs: number[] = [];
    const chainMs: number[] = [];
    const relayMs: number[] = [];
    const durableRelayMs: number[] = [];
    const samples: FaultSample[] = [];
    const missed: RecoveryLatencyResult['missed'] = [];
    for (let i = 0; i < faults; i++) {
      this.assertOpen();
      baselineMs.push(await this.trip(this.bare!.roundTrip));
      await this.pause();
      chainMs.push(await this.trip(this.bare!.chain));
      await this.pause();
      relayMs.push(await this.trip(this.bare!.relay));
      await this.pause();
      durableRelayMs.push(await this.trip(this.bare!.durableRelay));
      await this.pause();
      // Round-robin over the jobs: consecutive faults hit different jobs (partitions) and a job's rollouts one after the other.
      const job = this.jobs[i % this.jobs.length];
      const machineId = job.rolloutIds[Math.floor(i / this.jobs.length)];
      const sample = await this.fault(job, machineId);
      if (sample) samples.push(sample);
      else missed.push({ jobId: job.jobId, machineId });
      if ((i + 1) % 10 === 0 || i + 1 === faults) {
        progress(
          `${i + 1}/${faults} faults; last: command after ${sample ? sample.totalMs.toFixed(1) : 'never'} ms, round trip ${baselineMs[i].toFixed(1)} ms, relay chain ${chainMs[i].toFixed(1)} ms`,
        );
      }
      await this.pause();
    }
    for (const s of this.services) if (!s.running) throw new Error(`${s.name} exited during the run (log in ${this.infra?.dir}/logs)`);
    for (const r of this.relays) if (r.exitCode !== null || r.signalCode !== null) throw new Error('a bare relay process exited during the run');
    const durableRelayRows = await this.countDurableRelayRows();
    return { baselineMs, chainMs, relayMs, durableRelayMs, durableRelayRows, samples, missed, jobs: this.jobs.length, partitions: this.partitions };
  }

  private async countDurableRelayRows(): Promise<number> {
    const db = new Client({ connectionString: this.infra!.databaseUrl });
    await db.connect();
    try {
      const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${DURABLE_RELAY_TABLE}`);
      return Number(rows[0].n);
    } finally {
      await db.end();
    }
  }

  /** Stops whatever was started, in reverse order; safe to call twice and at any point of start(). */
  close(): Promise<void> {
    this.closing ??= this.stopAll();
    return this.closing;
  }

  private async stopAll(): Promise<void> {
    this.closed = true;
    this.pending = null;
    for (const job of this.jobs) await job.stop().catch(() => undefined);
    for (const client of this.kafka.clients.reverse()) await client.disconnect().catch(() => undefined);
    this.kafka.clients = [];
    await Promise.all(this.relays.map((r) => stopChild(r)));
    await this.signalBus?.close().catch(() => undefined);
    await this.agentBus?.close().catch(() => undefined);
    await Promise.all(this.services.map((s) => s.terminate().catch(() => undefined)));
    const infra = this.infra;
    this.infra = undefined;
    if (!infra) return;
    if (process.env.ROBUSTRL_BENCH_KEEP === '1') this.options.progress(`kept ${infra.dir} (ROBUSTRL_BENCH_KEEP=1); stop its servers with deploy/local scripts`);
    else infra.destroy();
  }

  // ── the fault path ─────────────────────────────────────────────────────────────────────────

  /**
   * A job the controller has fully taken in: JobStarted, registrations, its first step completed (so
   * rule 1, a fault in the first iteration, does not apply), telemetry running; proven by a warm-up
   * fault on its spare rollout that the controller answers at the rollout's level (ROLLOUT_ANSWERS). Those inputs
   * travel on three topics, so the controller may decide the warm-up before it has read the step: a job
   * whose warm-up escalated is dropped (its task restart would cover every later fault) and a new one made.
   */
  private async readyJob(): Promise<SyntheticJob> {
    const { trainersPerJob, faultsPerJob, progress } = this.options;
    for (let attempt = 1; ; attempt++) {
      const job = new SyntheticJob(
        this.agentBus!,
        { trainers: trainersPerJob, rollouts: faultsPerJob + 1 },
        // The detector's default windows (every machine reports, so nothing else is suspected); no straggler reports.
        { straggler: { enabled: false } },
      );
      this.jobs.push(job); // stopped by close() if the run is interrupted
      await job.begin();
      await job.publish([job.message('TrainingStepCompleted', { step: 0, batchId: 'bench-batch-0', durationMs: 1_000 })]);
      if (this.options.telemetryMs > 0) job.run(this.options.telemetryMs);
      await sleep(1_000 * attempt);
      const warmup = job.rolloutIds[faultsPerJob];
      const sample = await this.fault(job, warmup);
      this.jobs.splice(this.jobs.indexOf(job), 1);
      if (sample && ROLLOUT_ANSWERS.has(sample.command)) return job;
      await job.stop();
      const what = sample ? `${sample.command} (the controller had not read the job's first step yet)` : 'no command';
      if (attempt >= 3) throw new Error(`job ${job.jobId}: the warm-up fault got ${what}, ${attempt} times`);
      progress(`job ${job.jobId}: the warm-up fault got ${what}; trying a new job`);
    }
  }

  /** Signal a fault as the machine's agent would and wait for the controller's first command for it. */
  private async fault(job: SyntheticJob, machineId: string): Promise<FaultSample | null> {
    const signal = createMessage(
      'AgentFaultSignalled',
      {
        machineId,
        role: 'rollout',
        signal: 'process-exited',
        detail: 'rollout engine exited (bench:recovery-latency)',
        exitCode: 1,
        observedAt: new Date().toISOString(),
      },
      { jobId: job.jobId, source: `agent/${machineId}`, occurredAt: new Date().toISOString() },
    );
    let timer: NodeJS.Timeout | undefined;
    const command = new Promise<Seen | null>((done) => {
      this.pending = { jobId: job.jobId, machineId, correlationId: signal.correlationId, done };
      timer = setTimeout(() => done(null), COMMAND_TIMEOUT_MS);
    });
    const sentAt = Date.now();
    const t0 = performance.now();
    await this.signalBus!.publish(signal);
    job.silenced.add(machineId); // its process is gone: no more samples
    const seen = await command;
    clearTimeout(timer);
    this.pending = null;
    if (!seen) return null;
    const verdict = this.verdicts.get(signal.correlationId);
    const decision = this.decisions.get(signal.correlationId);
    /** When the bench consumed a record, on the wall clock the envelopes' times use. */
    const epoch = (s: Seen) => sentAt + (s.consumedAt - t0);
    return {
      jobId: job.jobId,
      machineId,
      command: seen.type,
      totalMs: seen.consumedAt - t0,
      toDetectorMs: verdict ? verdict.occurredAt - sentAt : null,
      detectorToVerdictMs: verdict ? epoch(verdict) - verdict.occurredAt : null,
      detectorToControllerMs: verdict ? seen.occurredAt - verdict.occurredAt : null,
      controllerToDecisionMs: decision ? epoch(decision) - seen.occurredAt : null,
      controllerToConsumedMs: epoch(seen) - seen.occurredAt,
    };
  }

  /** The bench's observer (recovery-observer.ts): keeps each fault's story and ends the pending fault's wait. */
  private async startObserver(brokers: string[]): Promise<void> {
    await observeVerdictsAndCommands(brokers, this.topicPrefix, this.kafka.clients, (seen) => {
      if (seen.type === 'FaultConfirmed') this.verdicts.set(seen.correlationId, seen);
      if (seen.type === 'RecoveryDecided') this.decisions.set(seen.correlationId, seen);
      const p = this.pending;
      if (p && COMMAND_TYPES.has(seen.type) && seen.jobId === p.jobId && (seen.correlationId === p.correlationId || seen.machineId === p.machineId)) {
        this.pending = null;
        p.done(seen);
      }
    });
  }

  // ── the baseline (recovery-baseline.ts) ────────────────────────────────────────────────────

  private async startBaseline(brokers: string[]): Promise<void> {
    const owner = { topicPrefix: this.topicPrefix, clients: this.kafka.clients, relays: this.relays, databaseUrl: () => this.infra!.databaseUrl };
    const { bare, partitions } = await startBaseline(owner, brokers);
    this.partitions = partitions;
    this.bare = bare;
  }

  private bareRoutes(): BareRoute[] {
    const { roundTrip, chain, relay, durableRelay } = this.bare!;
    return [roundTrip, chain, relay, durableRelay];
  }

  /** One record through a route: ms from the send call to its consumer (bareTrip). */
  private trip(route: BareRoute): Promise<number> {
    return bareTrip(this.bare!, route);
  }

  private pause(): Promise<void> {
    // Random, so the faults do not fall into step with the telemetry interval or the services' 1 s ticks.
    return sleep(this.options.gapMs * (1 + Math.random()));
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('interrupted');
  }
}

async function waitFor(what: string, condition: () => Promise<boolean>, timeoutMs: number, cancelled: () => boolean): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (cancelled()) throw new Error('interrupted');
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(250);
  }
}
