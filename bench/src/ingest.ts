import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel } from 'kafkajs';
import { Client } from 'pg';
import { KafkaBus, partitionFor } from '@robustrl/bus';
import { shardName } from '@robustrl/service-kit';
import { createMessage, RobustrlMessage, Topics } from '@robustrl/contracts';
import { createScratchDatabase } from '@robustrl/store';
import { DecidingService, ServiceProcess } from './service-process';

export interface IngestCase {
  machines: number;
  jobs: number;
  /** Telemetry records in the backlog (over all jobs). */
  records: number;
  services: readonly DecidingService[];
  /**
   * The detector is run once per shard count listed, side by side on the same backlog (default [1]);
   * a count above 1 runs that many detector processes (`ROBUSTRL_SHARD`), drained together.
   */
  detectorShards?: readonly number[];
  /** Seconds of steady load after the backlog, at half the rate the service drained it (0: none). */
  steadySeconds: number;
}

export type BareConsumer = 'bare kafkajs (eachBatch)' | 'bare kafkajs (eachMessage)';

export interface IngestRow {
  consumer: BareConsumer | DecidingService;
  /** Processes the service ran as (the detector's shards); 1 when absent. */
  shards?: number;
  machines: number;
  jobs: number;
  records: number;
  /** Records per second while it worked through the backlog (null: it did not finish within the time limit). */
  drainRate: number;
  finished: boolean;
  /** The steady phase: the rate offered, and the largest lag seen (records and seconds of input). */
  steady?: { rate: number; maxLagRecords: number; maxLagMs: number };
  /** CPU time the consumer used per record while it worked through the backlog (its processes', or the bench's for a bare one), in µs. */
  cpuUsPerRecord?: number;
  /** Growth of the database while it consumed, per telemetry record. */
  storedBytesPerRecord?: number;
}

/** Partitions of every topic in a case. */
const TOPIC_PARTITIONS = 6;

/**
 * `count` job ids, job i on partition i mod `partitions`: jobs in parallel are on partitions of their own
 * (random ids would often share one, and then be decided one after the other), and spread evenly over
 * any number of shards that divides the partitions.
 */
function spreadJobIds(count: number, partitions: number): string[] {
  return Array.from({ length: count }, (_, i) => {
    for (;;) {
      const id = `ingest-${i}-${randomUUID().slice(0, 6)}`;
      if (partitionFor(id, partitions) === i % partitions) return id;
    }
  });
}

/** Telemetry a job of `machines` sends: one trainer in eight reports TensorCore activity, the rest throughput. */
function telemetryRound(jobId: string, machines: number): RobustrlMessage[] {
  const now = new Date().toISOString();
  const meta = { jobId, source: 'bench-ingest', occurredAt: now };
  const out: RobustrlMessage[] = [];
  for (let i = 0; i < machines; i++) {
    if (i % 8 === 0) {
      out.push(createMessage('GpuActivitySampled', { machineId: `m${i}`, sampledAt: now, intervalSeconds: 15, tensorActive: 0.7, source: 'emulated' }, meta));
    } else {
      out.push(
        createMessage(
          'RolloutThroughputSampled',
          {
            machineId: `m${i}`,
            rolloutId: `m${i}`,
            sampledAt: now,
            windowSeconds: 15,
            tokensPerSecond: 700 + (i % 100),
            completedRequests: 3,
            inFlightRequests: 8,
            awaitingTools: 2,
          },
          meta,
        ),
      );
    }
  }
  return out;
}

/**
 * One ingest case on the real broker and PostgreSQL: fresh topics (six partitions) and a scratch
 * database; the jobs register their machines, then a backlog of telemetry is published; a bare
 * kafkajs consumer reads it (the baseline), then each service, as its own process, works through it,
 * and, after the backlog, keeps up with a steady load at half its drain rate while its lag is sampled.
 * A service's progress is read from its checkpoints (every batch it decides moves one).
 */
export async function runIngestCase(c: IngestCase, brokers: string[], databaseUrl: string, progress: (line: string) => void): Promise<IngestRow[]> {
  const database = await createScratchDatabase(databaseUrl, 'bench_ingest');
  const topicPrefix = `bench-ingest-${randomUUID().slice(0, 8)}.`;
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
  const bus = new KafkaBus({ brokers, clientId: 'bench-ingest', topicPrefix, partitions: TOPIC_PARTITIONS, logger: quiet });
  const kafka = new Kafka({ brokers, clientId: 'bench-ingest-bare', logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  const pg = new Client({ connectionString: database.url });
  const rows: IngestRow[] = [];
  try {
    await bus.ensureTopics();
    await admin.connect();
    await pg.connect();
    const telemetryTopic = topicPrefix + Topics.telemetry;
    const jobIds = spreadJobIds(c.jobs, TOPIC_PARTITIONS);
    for (const jobId of jobIds) {
      const meta = { jobId, source: 'bench-ingest', occurredAt: new Date().toISOString() };
      await bus.publish(
        createMessage(
          'JobStarted',
          { mode: 'async', resumedFromStep: null, trainerMachines: Math.ceil(c.machines / 8), rolloutMachines: c.machines - Math.ceil(c.machines / 8) },
          meta,
        ),
      );
      const registrations: RobustrlMessage[] = [];
      for (let i = 0; i < c.machines; i++) {
        const role = i % 8 === 0 ? 'trainer' : 'rollout';
        registrations.push(
          createMessage(
            'MachineRegistered',
            { machineId: `m${i}`, role, zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: `m${i}:8086`, dpRank: 0 },
            meta,
          ),
        );
        if (role === 'trainer')
          registrations.push(createMessage('RolePhaseChanged', { machineId: `m${i}`, role, phase: 'training', step: 1, changedAt: meta.occurredAt }, meta));
      }
      for (let i = 0; i < registrations.length; i += 2_000) await bus.publish(registrations.slice(i, i + 2_000));
    }
    const rounds = Math.max(1, Math.ceil(c.records / (c.machines * c.jobs)));
    progress(`  ${c.jobs} job(s) of ${c.machines} machines: publishing ${rounds} round(s) of telemetry (${rounds * c.machines * c.jobs} records)`);
    for (let r = 0; r < rounds; r++) {
      const round = jobIds.flatMap((jobId) => telemetryRound(jobId, c.machines));
      for (let i = 0; i < round.length; i += 1_000) await bus.publish(round.slice(i, i + 1_000));
    }
    const total = await endOffsetSum(admin, telemetryTopic);

    // The baselines: bare kafkajs consumers of the same topic, counting records — batch by batch (the
    // fastest a Node consumer reads) and message by message (how a kafkajs consumer is usually written).
    for (const mode of ['eachBatch', 'eachMessage'] as const) {
      const bare = await drainBare(kafka, telemetryTopic, total, mode);
      rows.push({
        consumer: `bare kafkajs (${mode})`,
        machines: c.machines,
        jobs: c.jobs,
        records: total,
        drainRate: bare.rate,
        cpuUsPerRecord: bare.cpuUsPerRecord,
        finished: true,
      });
      progress(`  bare kafkajs (${mode}): ${Math.round(bare.rate)} records/s, ${bare.cpuUsPerRecord.toFixed(1)} µs CPU per record`);
    }

    const runs = c.services.flatMap((service) => (service === 'detector' ? (c.detectorShards ?? [1]) : [1]).map((shards) => ({ service, shards })));
    for (const { service, shards } of runs) {
      // Later runs read the same backlog from the start; an earlier run's steady records are part of it now.
      const backlog = await endOffsetSum(admin, telemetryTopic);
      const sizeBefore = await databaseBytes(pg);
      const label = shards === 1 ? service : `${service} (${shards} shards)`;
      // Each run is a layout of its own on this database: the shards start it from the beginning of the topics.
      const names = Array.from({ length: shards }, (_, index) => shardName(service, { index, count: shards }));
      const procs = Array.from(
        { length: shards },
        (_, i) =>
          new ServiceProcess(service, {
            KAFKA_BROKERS: brokers.join(','),
            DATABASE_URL: database.url,
            ROBUSTRL_TOPIC_PREFIX: topicPrefix,
            ...(shards > 1 ? { ROBUSTRL_SHARD: `${i}/${shards}`, ROBUSTRL_SHARD_LAYOUT_CHANGE: 'replay' } : {}),
          }),
      );
      for (const proc of procs) proc.start();
      try {
        const cpuMs = () => procs.reduce((sum, proc) => sum + (proc.cpuMs() ?? 0), 0);
        const drained = await drainService(pg, names, backlog, 120_000, cpuMs, () => {
          for (const proc of procs) if (!proc.running) throw new Error(`${label} exited:\n${proc.tail()}`);
        });
        const row: IngestRow = {
          consumer: service,
          shards,
          machines: c.machines,
          jobs: c.jobs,
          records: backlog,
          drainRate: drained.rate,
          cpuUsPerRecord: drained.cpuUsPerRecord,
          finished: drained.finished,
        };
        progress(
          `  ${label}: ${Math.round(drained.rate)} records/s through the backlog, ${drained.cpuUsPerRecord.toFixed(1)} µs CPU per record${drained.finished ? '' : ' (did not finish in 120 s)'}`,
        );
        if (drained.finished) row.storedBytesPerRecord = Math.max(0, (await databaseBytes(pg)) - sizeBefore) / backlog;
        if (drained.finished && c.steadySeconds > 0) {
          row.steady = await steadyLoad(bus, pg, names, jobIds, c.machines, drained.rate / 2, c.steadySeconds, await consumedBy(pg, names));
          progress(
            `  ${label}: steady ${Math.round(row.steady.rate)} records/s, largest lag ${row.steady.maxLagRecords} records (${row.steady.maxLagMs} ms of input)`,
          );
        }
        rows.push(row);
      } finally {
        await Promise.all(procs.map((proc) => proc.stop()));
      }
    }
    return rows;
  } finally {
    await admin.disconnect().catch(() => undefined);
    await pg.end().catch(() => undefined);
    await bus.close().catch(() => undefined);
    await database.drop().catch(() => undefined);
  }
}

async function endOffsetSum(admin: ReturnType<Kafka['admin']>, topic: string): Promise<number> {
  return (await admin.fetchTopicOffsets(topic)).reduce((n, p) => n + Number(p.high), 0);
}

/** Records per second a bare kafkajs consumer reads the topic at, from its first batch to the last record. */
async function drainBare(kafka: Kafka, topic: string, total: number, mode: 'eachBatch' | 'eachMessage'): Promise<{ rate: number; cpuUsPerRecord: number }> {
  const consumer = kafka.consumer({ groupId: `bench-ingest-bare-${randomUUID()}`, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let count = 0;
  let first = 0;
  let done = 0;
  // The bench's own process is the consumer here, and does nothing else meanwhile.
  let cpuAtFirst: NodeJS.CpuUsage | undefined;
  let cpuUsed: NodeJS.CpuUsage | undefined;
  const seen = (n: number) => {
    if (first === 0) {
      first = Date.now();
      cpuAtFirst = process.cpuUsage();
    }
    count += n;
    if (count >= total && done === 0) {
      done = Date.now();
      cpuUsed = process.cpuUsage(cpuAtFirst);
    }
  };
  await consumer.run(
    mode === 'eachBatch'
      ? { partitionsConsumedConcurrently: 4, eachBatch: async ({ batch }) => seen(batch.messages.length) }
      : { partitionsConsumedConcurrently: 4, eachMessage: async () => seen(1) },
  );
  const deadline = Date.now() + 120_000;
  while (done === 0 && Date.now() < deadline) await sleep(20);
  await consumer.disconnect();
  const cpu = cpuUsed ?? process.cpuUsage(cpuAtFirst);
  return { rate: (count * 1000) / Math.max(1, (done || Date.now()) - first), cpuUsPerRecord: (cpu.user + cpu.system) / Math.max(1, count) };
}

/** Telemetry records the service (its shards' names) has decided: its checkpoints on the telemetry topic; offsets start at 0 on fresh topics. */
async function consumedBy(pg: Client, names: readonly string[]): Promise<number> {
  try {
    const { rows } = await pg.query<{ n: string }>(
      `SELECT coalesce(sum(position + 1), 0)::text AS n FROM robustrl_consumer_checkpoints WHERE consumer = ANY($1) AND stream LIKE 'robustrl.telemetry/%'`,
      [names],
    );
    return Number(rows[0].n);
  } catch {
    return 0; // its tables do not exist yet
  }
}

/** Records/s from the first checkpoint the service moved to the last, and the CPU its processes used per record in between. */
async function drainService(
  pg: Client,
  names: readonly string[],
  total: number,
  limitMs: number,
  cpuMs: () => number,
  check: () => void,
): Promise<{ rate: number; cpuUsPerRecord: number; finished: boolean }> {
  const start = Date.now();
  let first: { at: number; n: number; cpu: number } | null = null;
  for (;;) {
    check();
    const n = await consumedBy(pg, names);
    const at = Date.now();
    if (first === null && n > 0) first = { at, n, cpu: cpuMs() };
    const finished = first !== null && n >= total;
    if (finished || at - start > limitMs) {
      if (!first) return { rate: 0, cpuUsPerRecord: 0, finished: false };
      const records = Math.max(1, n - first.n);
      return { rate: (records * 1000) / Math.max(1, at - first.at), cpuUsPerRecord: ((cpuMs() - first.cpu) * 1000) / records, finished };
    }
    await sleep(50);
  }
}

/** Publish at `rate` for `seconds` (one round of a job at a time) and sample how far the service is behind. */
async function steadyLoad(
  bus: KafkaBus,
  pg: Client,
  names: readonly string[],
  jobIds: string[],
  machines: number,
  rate: number,
  seconds: number,
  consumedBefore: number,
): Promise<{ rate: number; maxLagRecords: number; maxLagMs: number }> {
  let published = 0;
  let maxLag = 0;
  const start = Date.now();
  const end = start + seconds * 1000;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const lag = consumedBefore + published - (await consumedBy(pg, names));
      if (lag > maxLag) maxLag = lag;
      await sleep(100);
    }
  })();
  let job = 0;
  const chunk = Math.max(100, Math.round(rate / 20));
  while (Date.now() < end) {
    // Keep to the rate: publish when behind schedule, else wait.
    const due = ((Date.now() - start) / 1000) * rate;
    if (published < due) {
      const round = telemetryRound(jobIds[job++ % jobIds.length], machines);
      for (let i = 0; i < round.length && published < due + chunk; i += chunk) {
        const part = round.slice(i, i + chunk);
        await bus.publish(part);
        published += part.length;
      }
    } else await sleep(5);
  }
  const achieved = (published * 1000) / (Date.now() - start);
  const drainedAt = Date.now() + 10_000;
  while ((await consumedBy(pg, names)) < consumedBefore + published && Date.now() < drainedAt) await sleep(50);
  sampling = false;
  await sampler;
  return { rate: achieved, maxLagRecords: maxLag, maxLagMs: Math.round((maxLag / Math.max(1, achieved)) * 1000) };
}

async function databaseBytes(pg: Client): Promise<number> {
  const { rows } = await pg.query<{ n: string }>(`SELECT pg_database_size(current_database())::text AS n`);
  return Number(rows[0].n);
}
