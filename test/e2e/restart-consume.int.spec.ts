import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { KafkaBus } from '@robustrl/bus';
import { createMessage } from '@robustrl/contracts';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { eventually } from '@robustrl/testing/eventually';

const DETECTOR_MAIN = join(__dirname, '..', '..', 'services', 'detector', 'dist', 'main.js');

/** A restarted service consumes again within seconds — measured here from process start. */
const RESTART_BUDGET_MS = 5_000;

/**
 * Fast restarts, on the real broker and PostgreSQL: the real detector service as its own process
 * (services/detector, built) while a job sends telemetry, killed with kill -9 — its member left behind
 * in the consumer group — or stopped with SIGTERM, then started again. From the new process's start to
 * the first telemetry it applies must take less than 5 s; and across both restarts no fact may be lost
 * (every one published ends up in the detector's inbox).
 */
describe('a restarted detector consumes again within 5 s (real Kafka, PostgreSQL, processes)', () => {
  const brokers = process.env.KAFKA_BROKERS!.split(',');
  const topicPrefix = `e2e-restart-${randomUUID().slice(0, 8)}.`;
  const jobId = `job-${randomUUID().slice(0, 8)}`;
  let database: { url: string; drop(): Promise<void> };
  let bus: KafkaBus;
  let pg: Client;
  let detector: ChildProcess | undefined;
  const output: string[] = [];
  /** The HTTP address each detector process announced (`health at http://…/healthz`). */
  const urls = new Map<ChildProcess, string>();
  const published: string[] = [];
  let publishing = true;
  let publisher: Promise<void>;

  const start = () => {
    const child = spawn(process.execPath, [DETECTOR_MAIN], {
      env: { ...process.env, KAFKA_BROKERS: brokers.join(','), DATABASE_URL: database.url, ROBUSTRL_TOPIC_PREFIX: topicPrefix, ROBUSTRL_HTTP_PORT: '0' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const collect = (b: Buffer) => {
      const lines = b.toString().split('\n').filter(Boolean);
      output.push(...lines);
      for (const l of lines) {
        const url = /health at (http:\/\/\S+)\/healthz/.exec(l)?.[1];
        if (url) urls.set(child, url);
      }
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    return child;
  };
  const stop = async (child: ChildProcess, signal: NodeJS.Signals) => {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  };
  const applied = async (): Promise<number> => {
    const { rows } = await pg.query<{ n: number }>(`SELECT count(*)::int AS n FROM robustrl_inbox WHERE consumer = 'detector'`);
    return rows[0].n;
  };
  /** Milliseconds from `startedAt` to the first poll that sees the inbox grow past `before`. */
  const consumingAfter = async (startedAt: number, before: number) => {
    await eventually('the restarted detector applying telemetry', async () => ((await applied()) > before ? true : undefined), 30_000);
    return Date.now() - startedAt;
  };
  const restart = async (signal: NodeJS.Signals) => {
    await stop(detector!, signal);
    const before = await applied();
    const startedAt = Date.now();
    detector = start();
    const ms = await consumingAfter(startedAt, before);
    process.stdout.write(`detector restart after ${signal === 'SIGKILL' ? 'kill -9' : signal}: process start → consuming in ${ms} ms\n`);
    return ms;
  };

  beforeAll(async () => {
    database = await freshDatabaseUrl('robustrl_e2e');
    bus = new KafkaBus({ brokers, clientId: 'e2e-restart', topicPrefix, logger: { info: () => undefined, warn: () => undefined, error: console.error } });
    await bus.ensureTopics();
    // The job: one trainer's GPU activity, ten samples a second.
    publisher = (async () => {
      while (publishing) {
        const meta = { jobId, source: 'e2e', occurredAt: new Date().toISOString() };
        const sample = createMessage(
          'GpuActivitySampled',
          { machineId: 'trainer-0', sampledAt: meta.occurredAt, intervalSeconds: 0.1, tensorActive: 0.6, source: 'emulated' },
          meta,
        );
        // Samples are kept nowhere (docs/contributors/snapshots.md "Telemetry is not a fact"): a fact beside each one shows what was applied.
        const beacon = createMessage('HeartbeatAcked', { probeId: `beacon/${randomUUID()}`, machineId: 'e2e-beacon', ackedAt: meta.occurredAt }, meta);
        await bus.publish([sample, beacon]);
        published.push(beacon.eventId);
        await sleep(100);
      }
    })();
    detector = start();
    // The service migrates the store; poll until its table exists and the first samples are in.
    pg = new Client({ connectionString: database.url });
    await pg.connect();
    await eventually('the first detector consuming', async () => ((await applied().catch(() => 0)) > 0 ? true : undefined), 60_000);
  }, 90_000);

  afterAll(async () => {
    publishing = false;
    await publisher;
    if (detector && detector.exitCode === null) await stop(detector, 'SIGTERM');
    await pg?.end();
    await bus?.close();
    await database?.drop();
  });

  it('after kill -9, with its dead member still in the group', async () => {
    const ms = await restart('SIGKILL');
    expect(ms).toBeLessThan(RESTART_BUDGET_MS);
    // The new process found and removed the member its predecessor left (predecessor-eviction.ts).
    expect(output.some((l) => l.includes('removed the member a dead process of this host left in the group'))).toBe(true);
  });

  it('after SIGTERM (it leaves the group on the way out)', async () => {
    expect(await restart('SIGTERM')).toBeLessThan(RESTART_BUDGET_MS);
  });

  it('serves its consumer group on /metrics: running, its lag from the broker, no restarts', async () => {
    const url = await eventually('the restarted detector serving HTTP', () => urls.get(detector!));
    const text = await (await fetch(`${url}/metrics`)).text();
    const sample = (series: string) =>
      text
        .split('\n')
        .find((l) => l.startsWith(`${series} `))
        ?.slice(series.length + 1);
    expect(sample('robustrl_bus_reachable')).toBe('1');
    expect(sample('robustrl_bus_consumer_running{group="robustrl-detector"}')).toBe('1');
    expect(Number(sample('robustrl_bus_consumer_lag{group="robustrl-detector"}'))).toBeGreaterThanOrEqual(0);
    expect(sample('robustrl_bus_consumer_restarts_total{group="robustrl-detector"}')).toBe('0');
  });

  it('lost no fact across both restarts', async () => {
    await sleep(500);
    const upTo = published.length;
    const ids = await eventually(
      `all ${upTo} facts published so far applied`,
      async () => {
        const { rows } = await pg.query<{ event_id: string }>(`SELECT event_id FROM robustrl_inbox WHERE consumer = 'detector'`);
        const seen = new Set(rows.map((r) => r.event_id));
        return published.slice(0, upTo).every((id) => seen.has(id)) ? seen : undefined;
      },
      30_000,
    );
    expect(published.slice(0, upTo).filter((id) => !ids.has(id))).toEqual([]);
  });
});
