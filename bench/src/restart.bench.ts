/**
 * `npm run bench:restart` — a detector killed with kill -9 after a job sent 10k, 100k and 1M samples:
 * from the new process's start to consuming again (≤ 3 s, and flat in the job's age).
 *
 *   node bench/dist/restart.bench.js [--machines M] [--max-samples N]
 *
 * One job of M machines (default 1,024) on the real broker and PostgreSQL (KAFKA_BROKERS / DATABASE_URL,
 * else the local services), fresh topics and a scratch database. The detector runs as its own process;
 * samples are published until it has decided 10k (then 100k, then 1M, up to N) of them, then it is
 * killed with kill -9 while the job keeps reporting (ten samples a second) and started again. Reported per
 * step: start → consuming (its first checkpoint moved), the state loaded (log line), and the rows it read at
 * start (job snapshots and inbox rows after them). Progress on stderr, the table (markdown) on stdout.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { KafkaBus } from '@robustrl/bus';
import { createMessage, RobustrlMessage } from '@robustrl/contracts';
import { createScratchDatabase } from '@robustrl/store';
import { localServiceSetting, parseIntegerOptions } from './bench-kit';
import { ServiceProcess } from './service-process';

interface RestartRow {
  samples: number;
  consumingMs: number;
  loadedMs: number | null;
  snapshotRows: number;
  inboxRows: number;
}

async function main(): Promise<void> {
  const progress = (line: string) => process.stderr.write(`${line}\n`);
  const options = parseIntegerOptions(process.argv.slice(2), process.env, 'bench/dist/restart.bench.js', {
    machines: { env: 'BENCH_MACHINES', fallback: 1_024, min: 1, placeholder: 'M' },
    'max-samples': { env: 'BENCH_MAX_SAMPLES', fallback: 1_000_000, min: 10_000, placeholder: 'N' },
  });
  const machines = options.machines;
  const steps = [10_000, 100_000, 1_000_000].filter((n) => n <= options['max-samples']);
  const brokers = localServiceSetting('KAFKA_BROKERS', progress).split(',');
  const database = await createScratchDatabase(localServiceSetting('DATABASE_URL', progress), 'bench_restart');
  const topicPrefix = `bench-restart-${randomUUID().slice(0, 8)}.`;
  const bus = new KafkaBus({
    brokers,
    clientId: 'bench-restart',
    topicPrefix,
    logger: { info: () => undefined, warn: () => undefined, error: () => undefined },
  });
  const pg = new Client({ connectionString: database.url });
  const detector = new ServiceProcess('detector', { KAFKA_BROKERS: brokers.join(','), DATABASE_URL: database.url, ROBUSTRL_TOPIC_PREFIX: topicPrefix });
  const jobId = `restart-${randomUUID().slice(0, 8)}`;
  let trickling = true;
  let trickle: Promise<void> | undefined;
  try {
    await bus.ensureTopics();
    await pg.connect();
    const meta = () => ({ jobId, source: 'bench-restart', occurredAt: new Date().toISOString() });
    await bus.publish(createMessage('JobStarted', { mode: 'async', resumedFromStep: null, trainerMachines: 0, rolloutMachines: machines }, meta()));
    const registrations = Array.from({ length: machines }, (_, i) =>
      createMessage(
        'MachineRegistered',
        { machineId: `m${i}`, role: 'rollout', zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: `m${i}:8086`, dpRank: 0 },
        meta(),
      ),
    );
    for (let i = 0; i < registrations.length; i += 2_000) await bus.publish(registrations.slice(i, i + 2_000));
    const sample = (i: number): RobustrlMessage =>
      createMessage(
        'RolloutThroughputSampled',
        {
          machineId: `m${i % machines}`,
          rolloutId: `m${i % machines}`,
          sampledAt: new Date().toISOString(),
          windowSeconds: 15,
          tokensPerSecond: 800,
          completedRequests: 3,
          inFlightRequests: 8,
          awaitingTools: 2,
        },
        meta(),
      );
    detector.start();
    let published = 0;
    const rows: RestartRow[] = [];
    for (const target of steps) {
      progress(`publishing samples up to ${target}`);
      while (published < target) {
        const n = Math.min(4_000, target - published);
        await bus.publish(Array.from({ length: n }, (_, k) => sample(published + k)));
        published += n;
      }
      await until(`the detector deciding ${target} samples`, async () => (await decided(pg)) >= target, 600_000, detector);
      // A snapshot covers them (every 10 s by default), then the job goes on at ten samples a second.
      await sleep(11_000);
      trickling = true;
      trickle = (async () => {
        let i = 0;
        while (trickling) {
          await bus.publish(sample(i++));
          await sleep(100);
        }
      })();
      await sleep(500);
      await detector.stop('SIGKILL');
      const before = await lastCheckpointAt(pg);
      detector.start();
      await until('the restarted detector consuming', async () => (await lastCheckpointAt(pg)) > Math.max(before, detector.startedAt), 120_000, detector);
      const consumingMs = (await lastCheckpointAt(pg)) - detector.startedAt;
      const rowsRead = detector.loaded();
      rows.push({ samples: target, consumingMs, loadedMs: detector.at(/state loaded: /), ...rowsRead });
      progress(
        `  after ${target} samples: consuming ${consumingMs} ms after start; read ${rowsRead.snapshotRows} snapshot(s) and ${rowsRead.inboxRows} inbox row(s)`,
      );
      trickling = false;
      await trickle;
    }
    process.stdout.write(
      [
        '| samples before kill -9 | start → consuming (ms) | start → state loaded (ms) | job snapshots read | inbox rows read |',
        '|---:|---:|---:|---:|---:|',
        ...rows.map((r) => `| ${r.samples} | ${r.consumingMs} | ${r.loadedMs ?? ''} | ${r.snapshotRows} | ${r.inboxRows} |`),
      ].join('\n') + '\n',
    );
  } finally {
    trickling = false;
    await trickle;
    await detector.stop();
    await pg.end().catch(() => undefined);
    await bus.close().catch(() => undefined);
    await database.drop().catch(() => undefined);
  }
}

/** Telemetry records the detector has decided (its checkpoints on the telemetry topic; fresh topics start at 0). */
async function decided(pg: Client): Promise<number> {
  try {
    const { rows } = await pg.query<{ n: string }>(
      `SELECT coalesce(sum(position + 1), 0)::text AS n FROM robustrl_consumer_checkpoints WHERE consumer = 'detector' AND stream LIKE 'robustrl.telemetry/%'`,
    );
    return Number(rows[0].n);
  } catch {
    return 0;
  }
}

/** When the detector last moved a checkpoint (ms since the epoch; 0 before any). */
async function lastCheckpointAt(pg: Client): Promise<number> {
  try {
    const { rows } = await pg.query<{ at: Date | null }>(`SELECT max(updated_at) AS at FROM robustrl_consumer_checkpoints WHERE consumer = 'detector'`);
    return rows[0].at ? rows[0].at.getTime() : 0;
  } catch {
    return 0;
  }
}

async function until(what: string, done: () => Promise<boolean>, timeoutMs: number, service: ServiceProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (!service.running) throw new Error(`${service.service} exited while waiting for ${what}:\n${service.tail()}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${service.tail()}`);
    await sleep(20);
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
