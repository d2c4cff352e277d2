/**
 * `npm run bench:bus` — end-to-end throughput of the message bus for 1 KiB events:
 * produce → consume → commit, in one process, side by side with a bare kafkajs loop on the same broker.
 *
 *   node bench/dist/bus.bench.js [--events N] [--repeats R] [--batch B]
 *   (env fallbacks: BENCH_EVENTS, BENCH_REPEATS, BENCH_BATCH; KAFKA_BROKERS, else the local services are started)
 *
 * Variants, each a warm-up run then R measured runs, interleaved so drift hits all of them alike:
 *  - bare kafkajs: producer.send (acks -1) of the same bytes in the same batches; consumer with eachMessage
 *    and default auto-commit. The baseline every ratio is taken against.
 *  - kafka bus: robustrl KafkaBus.publish(batch) while a subscription (fresh group) consumes.
 *  - in-process bus: robustrl InProcessBus, same shape.
 * A run's clock starts at the first publish (consumer already joined) and stops when the handler has seen
 * all N events of the run and the subscription / consumer has closed (which commits). Progress goes to
 * stderr, the result table (markdown) to stdout.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { localServiceSetting, median, parseIntegerOptions, percentile } from './bench-kit';
import { performance } from 'node:perf_hooks';
import { Admin, Kafka, logLevel, Partitioners, Producer } from 'kafkajs';
import { createMessage, encodeMessage, MessageOf, topicOf } from '@robustrl/contracts';
import { BusLogger, InProcessBus, KafkaBus, MessageBus } from '@robustrl/bus';

const EVENT_TYPE = 'AgentFaultSignalled' as const;
type BenchEvent = MessageOf<typeof EVENT_TYPE>;
const BUS_TOPIC = topicOf(EVENT_TYPE);
/** The bench's KafkaBus writes under this prefix, so production topics never see benchmark records. */
const BUS_TOPIC_PREFIX = 'bench.';
const BARE_TOPIC = 'bench.bare';
const BARE_PARTITIONS = 3;
const EVENT_BYTES = 1024;
const MIB = 1024 * 1024;
/** A run that makes no progress for this long fails (a hung consumer must not hang the benchmark). */
const STALL_MS = 60_000;
const REPO_ROOT = resolve(__dirname, '..', '..');

interface Options {
  events: number;
  repeats: number;
  batch: number;
}

type Variant = 'bare' | 'kafka' | 'in-process';
const LABEL: Record<Variant, string> = {
  bare: 'bare kafkajs (baseline)',
  kafka: 'robustrl KafkaBus',
  'in-process': 'robustrl InProcessBus',
};
const SHORT: Record<Variant, string> = { bare: 'bare kafkajs', kafka: 'kafka bus', 'in-process': 'in-process bus' };

interface RunResult {
  /** First publish → all N handled and the subscription closed (committed). */
  seconds: number;
  /** First publish → last publish resolved. */
  publishSeconds: number;
  /** First publish → handler saw the N-th event. */
  consumeSeconds: number;
  /** Subscription / consumer close (waits for the running batch, commits). */
  closeMs: number;
  /** Per event: publish call of its batch → its handler ran, in ms. */
  latencyMs: Float64Array;
}

const quietLogger: BusLogger = {
  info: () => undefined,
  warn: () => undefined,
  error: (msg, fields) => process.stderr.write(`[bus] ERROR ${msg} ${fields ? JSON.stringify(fields) : ''}\n`),
};

const progress = (line: string) => process.stderr.write(`[bench:bus] ${line}\n`);

function parseOptions(argv: string[], env: NodeJS.ProcessEnv): Options {
  const options = parseIntegerOptions(argv, env, 'bench/dist/bus.bench.js', {
    events: { env: 'BENCH_EVENTS', fallback: 20_000, min: 1, placeholder: 'N' },
    repeats: { env: 'BENCH_REPEATS', fallback: 3, min: 1, placeholder: 'R' },
    batch: { env: 'BENCH_BATCH', fallback: 500, min: 1, placeholder: 'B' },
  });
  // One job id per run → one partition; a produce request carries one record batch of B events for it,
  // and the broker's default message.max.bytes is 1 MiB.
  if (options.batch * (EVENT_BYTES + 150) > 1_000_000) {
    throw new Error(`--batch ${options.batch} would exceed Kafka's default 1 MiB record-batch limit for 1 KiB events; use <= 850`);
  }
  return options;
}

/** KAFKA_BROKERS, or start the local services (idempotent) and use what they print. */
function resolveBrokers(): string[] {
  const raw = localServiceSetting('KAFKA_BROKERS', progress);
  const brokers = raw
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);
  if (brokers.length === 0) throw new Error(`KAFKA_BROKERS='${raw}' names no broker`);
  return brokers;
}

async function assertKafkaReachable(brokers: string[]): Promise<void> {
  const admin = new Kafka({
    clientId: 'robustrl-bench-probe',
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3_000,
    retry: { retries: 2, initialRetryTime: 300 },
  }).admin();
  try {
    await admin.connect();
    await admin.listTopics();
  } catch (err) {
    throw new Error(
      `cannot reach Kafka at ${brokers.join(',')}: ${(err as Error).message}. ` +
        'Start it with `bash deploy/local/services.sh up` (or point KAFKA_BROKERS at a running broker).',
    );
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** N valid AgentFaultSignalled messages of one job whose JSON encoding is exactly EVENT_BYTES bytes. */
function buildEvents(jobId: string, n: number): BenchEvent[] {
  const occurredAt = new Date().toISOString();
  const data = (detail: string) => ({
    machineId: 'bench-host-000',
    role: 'trainer' as const,
    signal: 'step-exception' as const,
    detail,
    exitCode: 1,
    observedAt: occurredAt,
  });
  const ctx = { jobId, source: 'bench/bus', occurredAt };
  const bare = encodeMessage(createMessage(EVENT_TYPE, data(''), ctx)).length;
  const pad = EVENT_BYTES - bare;
  if (pad < 0) throw new Error(`an empty ${EVENT_TYPE} is already ${bare} bytes (> ${EVENT_BYTES})`);
  const detail = 'RuntimeError: simulated step exception (bench payload) '.padEnd(pad, '.').slice(0, pad);
  const events: BenchEvent[] = [];
  for (let i = 0; i < n; i++) {
    const event = createMessage(EVENT_TYPE, data(detail), ctx);
    const size = encodeMessage(event).length;
    if (size !== EVENT_BYTES) throw new Error(`event ${i} encodes to ${size} bytes, expected ${EVENT_BYTES}`);
    events.push(event);
  }
  return events;
}

function chunk<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * Counts the events of one run as handlers see them (once each, duplicates ignored), records their
 * latency, and resolves when all were seen; fails when nothing happens for STALL_MS.
 */
class Tally {
  seen = 0;
  readonly latencyMs: Float64Array;
  private readonly flags: Uint8Array;
  private readonly done: Promise<void>;
  private finish!: () => void;
  private fail!: (err: Error) => void;

  constructor(
    readonly n: number,
    private readonly label: string,
  ) {
    this.latencyMs = new Float64Array(n);
    this.flags = new Uint8Array(n);
    this.done = new Promise<void>((res, rej) => {
      this.finish = res;
      this.fail = rej;
    });
  }

  hit(index: number, latencyMs: number): void {
    if (this.flags[index]) return;
    this.flags[index] = 1;
    this.latencyMs[index] = latencyMs;
    if (++this.seen === this.n) this.finish();
  }

  async wait(): Promise<void> {
    let last = -1;
    let lastChange = Date.now();
    let lastReport = Date.now();
    const timer = setInterval(() => {
      const now = Date.now();
      if (this.seen !== last) {
        last = this.seen;
        lastChange = now;
      } else if (now - lastChange > STALL_MS) {
        this.fail(new Error(`${this.label}: stalled at ${this.seen}/${this.n} events for ${STALL_MS / 1000}s`));
      }
      if (now - lastReport >= 5_000) {
        lastReport = now;
        progress(`  … ${this.label}: ${this.seen}/${this.n} events handled`);
      }
    }, 250);
    try {
      await this.done;
    } finally {
      clearInterval(timer);
    }
  }
}

/** Start a fresh consumer group at the current end of the topic, so a run reads only what it publishes. */
async function pinGroupAtEnd(admin: Admin, groupId: string, topic: string): Promise<void> {
  const ends = await admin.fetchTopicOffsets(topic);
  await admin.setOffsets({ groupId, topic, partitions: ends.map((p) => ({ partition: p.partition, offset: p.high })) });
}

/** After close: the group's committed offset must be past the last record the handler saw, per partition. */
async function assertCommitted(admin: Admin, groupId: string, topic: string, lastSeen: Map<number, bigint>): Promise<void> {
  const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
  for (const [partition, offset] of lastSeen) {
    const c = committed.partitions.find((p) => p.partition === partition)?.offset;
    if (c === undefined || BigInt(c) <= offset) {
      throw new Error(`group ${groupId}: committed offset of ${topic}[${partition}] is ${c}, but the handler saw offset ${offset}`);
    }
  }
  // Verified: drop the throw-away group so runs do not pile up groups on the broker.
  await admin.deleteGroups([groupId]).catch(() => undefined);
}

class Bench {
  private runSeq = 0;
  private readonly runTag = Date.now().toString(36);

  constructor(
    private readonly opts: Options,
    private readonly admin: Admin,
    private readonly kafkaBus: KafkaBus,
    private readonly bareProducer: Producer,
    private readonly kafka: Kafka,
  ) {}

  private nextJobId(variant: Variant): string {
    this.runSeq += 1;
    return `bench-${this.runTag}-${variant}-${this.runSeq}`;
  }

  run(variant: Variant): Promise<RunResult> {
    if (variant === 'bare') return this.runBare();
    if (variant === 'kafka') return this.runBus(variant, this.kafkaBus);
    return this.runBus(variant, new InProcessBus({ logger: quietLogger }));
  }

  /** KafkaBus or InProcessBus: publish(batch) in a loop while a fresh-group subscription consumes. */
  private async runBus(variant: Variant, bus: MessageBus): Promise<RunResult> {
    const { events: n, batch } = this.opts;
    const jobId = this.nextJobId(variant);
    const events = buildEvents(jobId, n);
    const batches = chunk(events, batch);
    const indexOf = new Map(events.map((e, i) => [e.eventId, i]));
    const sentAt = new Float64Array(batches.length);
    const tally = new Tally(n, `${SHORT[variant]} ${jobId}`);
    const lastSeen = new Map<number, bigint>();
    const groupId = `bench-group-${jobId}`;
    if (bus instanceof KafkaBus) {
      await bus.ensureTopics();
      await pinGroupAtEnd(this.admin, groupId, BUS_TOPIC_PREFIX + BUS_TOPIC);
    }

    const subscription = await bus.subscribe({
      groupId,
      topics: [BUS_TOPIC],
      fromBeginning: true,
      handler: async (d) => {
        if (d.message.jobId !== jobId) return; // someone else's record on the shared topic
        const i = indexOf.get(d.message.eventId);
        if (i === undefined) return;
        const offset = BigInt(d.offset);
        if ((lastSeen.get(d.partition) ?? -1n) < offset) lastSeen.set(d.partition, offset);
        tally.hit(i, performance.now() - sentAt[Math.floor(i / batch)]);
      },
    });

    const t0 = performance.now();
    const consumed = tally.wait();
    for (let b = 0; b < batches.length; b++) {
      sentAt[b] = performance.now();
      await bus.publish(batches[b]);
    }
    const tPublished = performance.now();
    await consumed;
    const tSeen = performance.now();
    await subscription.close();
    const t1 = performance.now();

    if (bus instanceof KafkaBus) {
      await assertCommitted(this.admin, groupId, BUS_TOPIC_PREFIX + BUS_TOPIC, lastSeen);
    } else if (bus instanceof InProcessBus) {
      await bus.close();
      const wire = bus.read(BUS_TOPIC)[0]?.value?.length;
      if (wire !== EVENT_BYTES) throw new Error(`in-process record value is ${wire} bytes, expected ${EVENT_BYTES}`);
    }
    return result(t0, tPublished, tSeen, t1, tally.latencyMs);
  }

  /** The baseline: plain kafkajs, same bytes, same key, same batch sizes, acks -1, eachMessage + auto-commit. */
  private async runBare(): Promise<RunResult> {
    const { events: n, batch } = this.opts;
    const jobId = this.nextJobId('bare');
    const key = Buffer.from(jobId, 'utf8');
    const values = buildEvents(jobId, n).map(encodeMessage);
    const batches = chunk(
      values.map((value) => ({ key: jobId, value })),
      batch,
    );
    const tally = new Tally(n, `${SHORT.bare} ${jobId}`);
    const lastSeen = new Map<number, bigint>();
    let next = 0; // our records arrive in order on their one partition: the k-th one seen is event k
    const groupId = `bench-group-${jobId}`;
    await pinGroupAtEnd(this.admin, groupId, BARE_TOPIC);

    const consumer = this.kafka.consumer({ groupId, allowAutoTopicCreation: false });
    await consumer.connect();
    await consumer.subscribe({ topics: [BARE_TOPIC], fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        if (!message.key || !key.equals(message.key)) return;
        const offset = BigInt(message.offset);
        const last = lastSeen.get(partition) ?? -1n;
        if (offset <= last) return; // redelivery
        lastSeen.set(partition, offset);
        tally.hit(next++, Date.now() - Number(message.timestamp));
      },
    });

    const t0 = performance.now();
    const consumed = tally.wait();
    for (const messages of batches) {
      await this.bareProducer.send({ topic: BARE_TOPIC, acks: -1, messages });
    }
    const tPublished = performance.now();
    await consumed;
    const tSeen = performance.now();
    await consumer.disconnect();
    const t1 = performance.now();

    await assertCommitted(this.admin, groupId, BARE_TOPIC, lastSeen);
    return result(t0, tPublished, tSeen, t1, tally.latencyMs);
  }
}

function result(t0: number, tPublished: number, tSeen: number, t1: number, latencyMs: Float64Array): RunResult {
  return {
    seconds: (t1 - t0) / 1000,
    publishSeconds: (tPublished - t0) / 1000,
    consumeSeconds: (tSeen - t0) / 1000,
    closeMs: t1 - tSeen,
    latencyMs,
  };
}

interface RunStats {
  eventsPerSec: number;
  seconds: number;
  consumeSeconds: number;
  publishSeconds: number;
  closeMs: number;
  p50: number;
  p99: number;
  max: number;
}

function stats(r: RunResult, n: number): RunStats {
  const sorted = Float64Array.from(r.latencyMs).sort();
  return {
    eventsPerSec: n / r.seconds,
    seconds: r.seconds,
    consumeSeconds: r.consumeSeconds,
    publishSeconds: r.publishSeconds,
    closeMs: r.closeMs,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1],
  };
}

const fmtInt = (x: number) => Math.round(x).toLocaleString('en-US');
const fmtMs = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

function describeRun(s: RunStats): string {
  return (
    `${fmtInt(s.eventsPerSec)} events/s, ${s.seconds.toFixed(2)} s (published ${s.publishSeconds.toFixed(2)} s, ` +
    `all handled ${s.consumeSeconds.toFixed(2)} s, close ${fmtMs(s.closeMs)} ms), ` +
    `latency p50 ${fmtMs(s.p50)} / p99 ${fmtMs(s.p99)} / max ${fmtMs(s.max)} ms`
  );
}

function localKafkaVersion(): string | undefined {
  for (const marker of [resolve(REPO_ROOT, '.local/kafka/libs/.kafka-version')]) {
    if (existsSync(marker)) return readFileSync(marker, 'utf8').trim() || undefined;
  }
  return undefined;
}

function kafkajsVersion(): string {
  try {
    return (JSON.parse(readFileSync(require.resolve('kafkajs/package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '?';
  }
}

async function ensureBareTopic(admin: Admin): Promise<void> {
  const topics = await admin.listTopics();
  if (topics.includes(BARE_TOPIC)) return;
  progress(`creating topic ${BARE_TOPIC} (${BARE_PARTITIONS} partitions)`);
  await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic: BARE_TOPIC, numPartitions: BARE_PARTITIONS, replicationFactor: -1 }],
  });
}

async function main(): Promise<void> {
  const opts = parseOptions(process.argv.slice(2), process.env);
  const brokers = resolveBrokers();
  await assertKafkaReachable(brokers);

  const kafka = new Kafka({ clientId: 'robustrl-bench-bare', brokers, logLevel: logLevel.ERROR, retry: { initialRetryTime: 100, retries: 8 } });
  const admin = kafka.admin();
  await admin.connect();
  await ensureBareTopic(admin);
  const bareProducer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, allowAutoTopicCreation: false });
  await bareProducer.connect();
  const kafkaBus = new KafkaBus({ brokers, clientId: 'robustrl-bench', topicPrefix: BUS_TOPIC_PREFIX, logger: quietLogger });

  const kafkaVersion = localKafkaVersion();
  progress(
    `${opts.events} events × ${EVENT_BYTES} B (${EVENT_TYPE} → ${BUS_TOPIC}; bare → ${BARE_TOPIC}), batch ${opts.batch}, ` +
      `1 warm-up + ${opts.repeats} runs per variant; brokers ${brokers.join(',')}`,
  );

  const bench = new Bench(opts, admin, kafkaBus, bareProducer, kafka);
  const variants: Variant[] = ['bare', 'kafka', 'in-process'];
  const runs = new Map<Variant, RunStats[]>(variants.map((v) => [v, []]));
  for (const v of variants) {
    progress(`warm-up ${SHORT[v]} …`);
    progress(`warm-up ${SHORT[v]}: ${describeRun(stats(await bench.run(v), opts.events))}`);
  }
  for (let r = 1; r <= opts.repeats; r++) {
    for (const v of variants) {
      const s = stats(await bench.run(v), opts.events);
      runs.get(v)!.push(s);
      progress(`run ${r}/${opts.repeats} ${SHORT[v]}: ${describeRun(s)}`);
    }
  }

  await kafkaBus.close();
  await bareProducer.disconnect();
  await admin.disconnect();

  const med = (v: Variant, f: (s: RunStats) => number) => median(runs.get(v)!.map(f));
  const base = med('bare', (s) => s.eventsPerSec);
  const lines: string[] = [];
  lines.push(
    `${fmtInt(opts.events)} events × ${EVENT_BYTES} B per run, publish batch ${opts.batch}, median of ${opts.repeats} run(s) after 1 warm-up; ` +
      `Node ${process.version}, kafkajs ${kafkajsVersion()}, Kafka ${kafkaVersion ?? '(version unknown)'} at ${brokers.join(',')}.`,
  );
  lines.push('Clock: first publish → handler saw all N → subscription closed (offsets committed). Latency: publish call → handler.');
  lines.push('');
  lines.push('| variant | events/s | MiB/s | vs bare kafkajs | wall s | all handled s | close ms | latency p50 / p99 / max ms |');
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const v of variants) {
    const eps = med(v, (s) => s.eventsPerSec);
    const maxLatency = Math.max(...runs.get(v)!.map((s) => s.max));
    lines.push(
      `| ${LABEL[v]} | ${fmtInt(eps)} | ${((eps * EVENT_BYTES) / MIB).toFixed(1)} | ${(eps / base).toFixed(2)}x | ` +
        `${med(v, (s) => s.seconds).toFixed(2)} | ${med(v, (s) => s.consumeSeconds).toFixed(2)} | ${fmtMs(med(v, (s) => s.closeMs))} | ` +
        `${fmtMs(med(v, (s) => s.p50))} / ${fmtMs(med(v, (s) => s.p99))} / ${fmtMs(maxLatency)} |`,
    );
  }
  lines.push('');
  for (const v of variants.filter((x) => x !== 'bare')) {
    lines.push(`- ${SHORT[v]} / bare kafkajs = ${(med(v, (s) => s.eventsPerSec) / base).toFixed(2)}x`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`[bench:bus] FAILED: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
