import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { KafkaBus } from '@robustrl/bus';
import { createMessage } from '@robustrl/contracts';
import { createScratchDatabase } from '@robustrl/store';

const REPO_ROOT = resolve(__dirname, '..', '..');

/** A deciding service as a deployment runs it: its built main, its own process. */
export type RestartedService = 'detector' | 'controller';
/** `evict`: the bus removes a dead predecessor's member before joining (the default); `wait`: it does not (git main before it). */
export type GroupJoin = 'evict' | 'wait';
export type StopSignal = 'SIGKILL' | 'SIGTERM';

/** Milliseconds from the new process's start to each point of its way back; null where it did not say. */
export interface RestartTiming {
  /** Node has loaded the service's modules and Nest starts (its first log line). */
  nestStarting: number | null;
  /** The store is open and migrated and the deciding consumer's state folded from its inbox. */
  stateRebuilt: number | null;
  /** The deciding consumer's subscription returned: connected, (dead member removed,) joined and synced. */
  subscribed: number | null;
  /** The first message applied (its inbox grew): consuming again. */
  consuming: number;
  /** Every module started, every subscription of the process joined (`ready` logged). */
  ready: number | null;
}

/**
 * A service process under steady load (a job's telemetry, ten records a second), stopped and started
 * again; measures the new process's way back from its start. One scratch database and one topic prefix,
 * so nothing of other runs is seen; the service's consumer group is the deployment's own
 * (`<prefix>robustrl-<service>`), the same across restarts, as in production.
 */
export class RestartBench {
  private child?: ChildProcess;
  private lines: Array<{ at: number; text: string }> = [];
  private publishing = true;
  private publisher?: Promise<void>;

  private constructor(
    readonly service: RestartedService,
    private readonly brokers: string[],
    private readonly database: { url: string; drop(): Promise<void> },
    private readonly topicPrefix: string,
    private readonly bus: KafkaBus,
    private readonly pg: Client,
  ) {}

  static async open(service: RestartedService, brokers: string[], databaseUrl: string): Promise<RestartBench> {
    const database = await createScratchDatabase(databaseUrl, 'bench_restart');
    const topicPrefix = `bench-restart-${randomUUID().slice(0, 8)}.`;
    const bus = new KafkaBus({
      brokers,
      clientId: 'bench-restart',
      topicPrefix,
      logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
    });
    await bus.ensureTopics();
    const pg = new Client({ connectionString: database.url });
    await pg.connect();
    return new RestartBench(service, brokers, database, topicPrefix, bus, pg);
  }

  /** Starts the load and the first process, and waits until it consumes. */
  async start(join: GroupJoin): Promise<void> {
    const jobId = `job-${randomUUID().slice(0, 8)}`;
    this.publisher = (async () => {
      while (this.publishing) {
        const meta = { jobId, source: 'bench', occurredAt: new Date().toISOString() };
        // The detector takes the GPU samples, the controller the training steps.
        await this.bus.publish([
          createMessage(
            'GpuActivitySampled',
            { machineId: 'trainer-0', sampledAt: meta.occurredAt, intervalSeconds: 0.1, tensorActive: 0.6, source: 'emulated' },
            meta,
          ),
          // Samples are kept nowhere: a fact beside each one (a heartbeat ack no rule acts on) shows the detector applying.
          createMessage('HeartbeatAcked', { probeId: `beacon/${randomUUID()}`, machineId: 'bench-beacon', ackedAt: meta.occurredAt }, meta),
          createMessage('TrainingStepCompleted', { step: 0, batchId: 'b0', durationMs: 1 }, meta),
        ]);
        await sleep(100);
      }
    })();
    const startedAt = Date.now();
    this.spawn(join);
    await this.consumingAfter(startedAt, 0, 60_000);
  }

  /** Stops the running process with `signal`, starts a new one right after it exited, and times its way back. */
  async restart(signal: StopSignal, join: GroupJoin): Promise<RestartTiming> {
    const old = this.child!;
    const exited = new Promise((r) => old.once('exit', r));
    old.kill(signal);
    await exited;
    const before = await this.applied();
    this.lines = [];
    const startedAt = Date.now();
    this.spawn(join);
    const consuming = await this.consumingAfter(startedAt, before, 120_000);
    await this.until(() => this.at(startedAt, / ready \(bus:/) !== null, 60_000);
    return {
      nestStarting: this.at(startedAt, /Starting Nest application/),
      stateRebuilt: this.at(startedAt, /state loaded: /),
      subscribed: this.at(startedAt, /deciding on \d+ message types/),
      consuming,
      ready: this.at(startedAt, / ready \(bus:/),
    };
  }

  async close(): Promise<void> {
    this.publishing = false;
    await this.publisher;
    if (this.child && this.child.exitCode === null) {
      const exited = new Promise((r) => this.child!.once('exit', r));
      this.child.kill('SIGTERM');
      await exited;
    }
    await this.pg.end();
    await this.bus.close();
    await this.database.drop();
  }

  private spawn(join: GroupJoin): void {
    const child = spawn(process.execPath, [resolve(REPO_ROOT, 'services', this.service, 'dist', 'main.js')], {
      env: {
        ...process.env,
        KAFKA_BROKERS: this.brokers.join(','),
        DATABASE_URL: this.database.url,
        ROBUSTRL_TOPIC_PREFIX: this.topicPrefix,
        ROBUSTRL_HTTP_PORT: 'off',
        ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS: join === 'evict' ? 'on' : 'off',
        // Plain log lines: the phases are found by their text.
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const collect = (b: Buffer) => {
      const at = Date.now();
      for (const text of b.toString().split('\n')) if (text.trim()) this.lines.push({ at, text });
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    this.child = child;
  }

  /** Messages the service's deciding consumer has applied so far (0 before its tables exist). */
  private async applied(): Promise<number> {
    try {
      const { rows } = await this.pg.query<{ n: number }>(`SELECT count(*)::int AS n FROM robustrl_inbox WHERE consumer = $1`, [this.service]);
      return rows[0].n;
    } catch {
      return 0;
    }
  }

  private async consumingAfter(startedAt: number, before: number, timeoutMs: number): Promise<number> {
    for (;;) {
      if ((await this.applied()) > before) return Date.now() - startedAt;
      if (Date.now() - startedAt > timeoutMs) throw new Error(`${this.service} did not consume within ${timeoutMs} ms:\n${this.tail()}`);
      await sleep(20);
    }
  }

  private async until(done: () => boolean, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`${this.service} did not get ready within ${timeoutMs} ms:\n${this.tail()}`);
      await sleep(20);
    }
  }

  private at(startedAt: number, pattern: RegExp): number | null {
    const line = this.lines.find((l) => pattern.test(l.text));
    return line ? line.at - startedAt : null;
  }

  private tail(): string {
    return this.lines
      .slice(-20)
      .map((l) => l.text)
      .join('\n');
  }
}
