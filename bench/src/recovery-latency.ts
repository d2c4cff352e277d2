import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Admin, Kafka, logLevel, Producer } from 'kafkajs';
import { Client } from 'pg';
import { BusLogger, KafkaBus } from '@robustrl/bus';
import { createMessage, encodeMessage, Topics } from '@robustrl/contracts';
import { DURABLE_RELAY_TABLE } from './bare-relay-table';
import { freePorts, PrivateInfra, ServiceProcess } from './chaos/private-infra';
import { SyntheticJob } from './chaos/synthetic-job';

/**
 * The run behind `npm run bench:recovery-latency` (see recovery-latency.bench.ts for what it measures
 * and why it is set up this way). Everything it starts — broker, PostgreSQL, service processes,
 * clients — is registered as it starts, so `close()` stops exactly that, at any point.
 */
export interface RecoveryLatencyOptions {
  /** Explicit fault signals measured (one round trip each as the baseline, interleaved). */
  faults: number;
  /** Faults per job: the rollout machines a job has for them (plus one for its warm-up fault). */
  faultsPerJob: number;
  /** Trainer machines per job (they keep reporting; no fault is signalled on them). */
  trainersPerJob: number;
  /** Pause after each measured round trip and each fault, plus up to as much again at random. */
  gapMs: number;
  /** How often each job's machines report (GPU activity, rollout throughput); 0: they do not (a quiet control plane). */
  telemetryMs: number;
  progress: (line: string) => void;
}

/** One fault: publish → the controller's command consumed, and where the time went (ms). */
export interface FaultSample {
  jobId: string;
  machineId: string;
  /** The controller's first command for it (RestartRolloutEngine for a rollout's exited engine, see ROLLOUT_ANSWERS). */
  command: string;
  /** The bench's publish call → the command consumed by the bench (performance.now()). */
  totalMs: number;
  /** Publish → the detector began handling the signal (FaultConfirmed.occurredAt, the detector's clock = ours). */
  toDetectorMs: number | null;
  /** Detector began handling → its FaultConfirmed consumed by the bench (the detector's commit and relay, one hop). */
  detectorToVerdictMs: number | null;
  /** Detector began handling → the controller began handling the verdict (the command's occurredAt). */
  detectorToControllerMs: number | null;
  /** Controller began handling → its RecoveryDecided (published with the command) consumed by the bench. */
  controllerToDecisionMs: number | null;
  /** Controller began handling → the command consumed by the bench. */
  controllerToConsumedMs: number | null;
}

export interface RecoveryLatencyResult {
  /** Bare kafkajs produce → consume round trips (ms). */
  baselineMs: number[];
  /** Bare produce → relay process → relay process → consume (ms): the path's three crossings with nothing decided. */
  chainMs: number[];
  /** Bare produce → one relay process → consume (ms): two crossings, one process, nothing decided (the goal's two round trips). */
  relayMs: number[];
  /** As `relayMs` with the relay committing a row to PostgreSQL before producing (the floor of one crash-safe deciding hop). */
  durableRelayMs: number[];
  /** Rows the durable relay committed (one per record it relayed, warm-ups included): proof that it wrote. */
  durableRelayRows: number;
  samples: FaultSample[];
  /** Faults whose command did not arrive within the timeout. */
  missed: Array<{ jobId: string; machineId: string }>;
  jobs: number;
  partitions: number;
}

/** The controller's commands (control topic): the first one for a fault ends its measurement. */
const COMMAND_TYPES = new Set(['RestartRolloutEngine', 'ReplaceMachine', 'RestartTrainerGroup', 'PromoteRolloutToTrainer', 'RestartTask']);
/**
 * The controller's answers to a rollout's exited engine that leave the job running: the engine restarted
 * in place while the machine has restarts left in its budget (every fault here hits a machine
 * once), else the machine replaced. A RestartTask instead means the controller had not read the job's step.
 */
export const ROLLOUT_ANSWERS: ReadonlySet<string> = new Set(['RestartRolloutEngine', 'ReplaceMachine']);
/** A fault whose command has not come after this long is counted as missed. */
const COMMAND_TIMEOUT_MS = 30_000;
export const BASELINE_WARMUP = 10;
const quiet: BusLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** What the bench's observer keeps of a record on the verdicts or control topic (plain JSON, no schema). */
interface Seen {
  type: string;
  jobId: string;
  correlationId: string;
  occurredAt: number;
  machineId: string | null;
  /** performance.now() when the bench's consumer got it. */
  consumedAt: number;
}

interface PendingFault {
  jobId: string;
  machineId: string;
  correlationId: string;
  done: (command: Seen) => void;
}

export class RecoveryLatencyRun {
  private infra?: PrivateInfra;
  private readonly services: ServiceProcess[] = [];
  private readonly jobs: SyntheticJob[] = [];
  private readonly kafka: { clients: Array<{ disconnect(): Promise<void> }> } = { clients: [] };
  private agentBus?: KafkaBus;
  private signalBus?: KafkaBus;
  private bare?: { producer: Producer; key: string; roundTrip: BareRoute; chain: BareRoute; relay: BareRoute; durableRelay: BareRoute };
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

  /** A plain kafkajs consumer (no robustrl code) on the verdicts and control topics, from their start. */
  private async startObserver(brokers: string[]): Promise<void> {
    const kafka = new Kafka({ brokers, clientId: 'bench-recovery-observer', logLevel: logLevel.NOTHING });
    const consumer = kafka.consumer({ groupId: `bench-recovery-observer-${randomUUID()}`, maxWaitTimeInMs: 1_000 });
    this.kafka.clients.push(consumer);
    await consumer.connect();
    await consumer.subscribe({ topics: [this.topicPrefix + Topics.verdicts, this.topicPrefix + Topics.control], fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        const consumedAt = performance.now();
        const seen = parseSeen(message.value, consumedAt);
        if (!seen) return;
        if (seen.type === 'FaultConfirmed') this.verdicts.set(seen.correlationId, seen);
        if (seen.type === 'RecoveryDecided') this.decisions.set(seen.correlationId, seen);
        const p = this.pending;
        if (p && COMMAND_TYPES.has(seen.type) && seen.jobId === p.jobId && (seen.correlationId === p.correlationId || seen.machineId === p.machineId)) {
          this.pending = null;
          p.done(seen);
        }
      },
    });
  }

  // ── the baseline ───────────────────────────────────────────────────────────────────────────

  /**
   * Topics of their own with as many partitions as the control topic (replication as the bus creates
   * them), a producer configured as the bus's (idempotent, one request in flight, acks=all) and
   * consumers polling as the bus's subscriptions do; kafkajs only, nothing of robustrl on the way.
   * Four routes: the round trip (one topic, produce → consume); the relay chain (three topics, two
   * bare-relay.ts processes between them: the recovery path's crossings and processes, nothing decided);
   * one bare relay (two topics, one process: the two crossings the goal allows for); one durable relay
   * (the same, committing a row to the run's PostgreSQL before producing: one crash-safe hop, nothing decided).
   */
  private async startBaseline(brokers: string[]): Promise<void> {
    const kafka = new Kafka({ brokers, clientId: 'bench-recovery-bare', logLevel: logLevel.NOTHING });
    const admin: Admin = kafka.admin();
    await admin.connect();
    const roundTripTopic = `${this.topicPrefix}bench.bare`;
    const chainTopics = [0, 1, 2].map((i) => `${this.topicPrefix}bench.chain.${i}`);
    const relayTopics = [0, 1].map((i) => `${this.topicPrefix}bench.relay.${i}`);
    const durableTopics = [0, 1].map((i) => `${this.topicPrefix}bench.durable-relay.${i}`);
    try {
      const meta = await admin.fetchTopicMetadata({ topics: [this.topicPrefix + Topics.control] });
      this.partitions = meta.topics[0].partitions.length;
      await admin.createTopics({
        waitForLeaders: true,
        topics: [roundTripTopic, ...chainTopics, ...relayTopics, ...durableTopics].map((topic) => ({
          topic,
          numPartitions: this.partitions,
          replicationFactor: -1,
        })),
      });
    } finally {
      await admin.disconnect();
    }
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
    this.kafka.clients.push(producer);
    await producer.connect();
    const roundTrip = await this.bareRoute(kafka, roundTripTopic, roundTripTopic);
    for (let hop = 0; hop < 2; hop++) await this.startRelay(brokers, chainTopics[hop], chainTopics[hop + 1]);
    const chain = await this.bareRoute(kafka, chainTopics[0], chainTopics[2]);
    await this.startRelay(brokers, relayTopics[0], relayTopics[1]);
    const relay = await this.bareRoute(kafka, relayTopics[0], relayTopics[1]);
    await this.startRelay(brokers, durableTopics[0], durableTopics[1], this.infra!.databaseUrl);
    const durableRelay = await this.bareRoute(kafka, durableTopics[0], durableTopics[1]);
    this.bare = { producer, key: `bench-bare-${randomUUID().slice(0, 8)}`, roundTrip, chain, relay, durableRelay };
  }

  /** A consumer of `consumeFrom` that resolves the trips sent to `sendTo` as their records arrive. */
  private async bareRoute(kafka: Kafka, sendTo: string, consumeFrom: string): Promise<BareRoute> {
    const consumer = kafka.consumer({ groupId: `bench-recovery-bare-${randomUUID()}`, maxWaitTimeInMs: 1_000 });
    this.kafka.clients.push(consumer);
    await consumer.connect();
    await consumer.subscribe({ topic: consumeFrom, fromBeginning: true });
    const waiting = new Map<string, (at: number) => void>();
    await consumer.run({
      eachMessage: async ({ message }) => {
        const at = performance.now();
        const id = message.headers?.['bench-id']?.toString();
        if (id) waiting.get(id)?.(at);
      },
    });
    return { topic: sendTo, waiting };
  }

  /**
   * One bare-relay.ts process from → to, durable when given a database (its stderr goes into the error if
   * it fails); resolves once its consumer joined.
   */
  private async startRelay(brokers: string[], from: string, to: string, databaseUrl?: string): Promise<void> {
    // The built script, whether this runs built (bench/dist) or from its source (tests).
    const script = resolve(__dirname, '..', 'dist', 'bare-relay.js');
    const child = spawn(process.execPath, [script, brokers.join(','), from, to, ...(databaseUrl ? [databaseUrl] : [])], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.relays.push(child);
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    await new Promise<void>((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`bare relay ${from} → ${to} not ready within 60 s: ${stderr}`)), 60_000);
      child.stdout!.on('data', (b: Buffer) => {
        if (b.toString().includes('ready')) {
          clearTimeout(timer);
          done();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        fail(new Error(`bare relay ${from} → ${to} exited (${code}): ${stderr}`));
      });
    });
  }

  private bareRoutes(): BareRoute[] {
    const { roundTrip, chain, relay, durableRelay } = this.bare!;
    return [roundTrip, chain, relay, durableRelay];
  }

  /**
   * One record (a fault signal's bytes) sent to a route's first topic; ms from the send call to the
   * eachMessage of the consumer at its end.
   */
  private async trip(route: BareRoute): Promise<number> {
    const { producer, key } = this.bare!;
    const id = randomUUID();
    const value = encodeMessage(
      createMessage(
        'AgentFaultSignalled',
        { machineId: 'rollout-0', role: 'rollout', signal: 'process-exited', detail: 'bare round trip', exitCode: 1, observedAt: new Date().toISOString() },
        { jobId: key, source: 'bench', occurredAt: new Date().toISOString() },
      ),
    );
    let timer: NodeJS.Timeout | undefined;
    const arrived = new Promise<number>((done, fail) => {
      route.waiting.set(id, done);
      timer = setTimeout(() => fail(new Error(`bare trip via ${route.topic}: record not consumed within ${COMMAND_TIMEOUT_MS} ms`)), COMMAND_TIMEOUT_MS);
    });
    const t0 = performance.now();
    await producer.send({ topic: route.topic, acks: -1, messages: [{ key, value, headers: { 'bench-id': id } }] });
    try {
      return (await arrived) - t0;
    } finally {
      clearTimeout(timer);
      route.waiting.delete(id);
    }
  }

  private pause(): Promise<void> {
    // Random, so the faults do not fall into step with the telemetry interval or the services' 1 s ticks.
    return sleep(this.options.gapMs * (1 + Math.random()));
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('interrupted');
  }
}

/** A bare route: the topic a trip is sent to, and the trips waiting for their record at its end. */
interface BareRoute {
  topic: string;
  waiting: Map<string, (at: number) => void>;
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  return exited.finally(() => clearTimeout(timer));
}

function parseSeen(value: Buffer | null, consumedAt: number): Seen | null {
  if (!value) return null;
  try {
    const m = JSON.parse(value.toString()) as {
      type?: unknown;
      jobId?: unknown;
      correlationId?: unknown;
      occurredAt?: unknown;
      data?: { machineId?: unknown; rolloutMachineId?: unknown };
    };
    if (typeof m.type !== 'string' || typeof m.jobId !== 'string' || typeof m.correlationId !== 'string') return null;
    const machine = m.data?.machineId ?? m.data?.rolloutMachineId;
    return {
      type: m.type,
      jobId: m.jobId,
      correlationId: m.correlationId,
      occurredAt: typeof m.occurredAt === 'string' ? Date.parse(m.occurredAt) : NaN,
      machineId: typeof machine === 'string' ? machine : null,
      consumedAt,
    };
  } catch {
    return null; // not a robustrl message
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
