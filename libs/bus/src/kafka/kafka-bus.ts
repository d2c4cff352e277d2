import { Admin, Kafka, KafkaConfig, logLevel, Producer, SASLOptions } from 'kafkajs';
import { ALL_TOPICS, DEAD_LETTER_TOPIC, RobustrlMessage } from '@robustrl/contracts';
import { DeadLetterCount, DeadLetterCounter } from '../dead-letter-counts';
import { RobustrlError } from '../errors';
import {
  BusHealth,
  BusLogger,
  DeadLetterLedger,
  DEFAULT_MAX_RECORD_BYTES,
  MessageBus,
  RawRecord,
  recordBytes,
  RecordTooLargeError,
  stderrLogger,
  PartitionPosition,
  BusIdentity,
  SubscribeOptions,
  Subscription,
  SubscriptionHealth,
} from '../message-bus';
import { OutboundRecord, publishTraced } from '../outbound';
import { GroupTiming, KafkaSubscription } from './kafka-subscription';
import { untilAvailable } from '../wait-for-dependency';
import { THIS_PROCESS } from './member-identity';
import { ConsumerRestartPolicy, DEFAULT_CONSUMER_RESTART } from './restart-backoff';

export interface KafkaBusOptions {
  brokers: string[];
  clientId?: string;
  /** Partitions of topics this bus creates (existing topics are left as they are). */
  partitions?: number;
  /** Create the robustrl topics and the dead-letter topic on first use. Default true. */
  ensureTopics?: boolean;
  /**
   * Offsets are committed only for records whose handler resolved; this bounds how many such
   * records may wait for a commit (a crash redelivers at most these, and idempotent handlers absorb them).
   */
  commit?: { intervalMs: number; threshold: number };
  logger?: BusLogger;
  kafkaLogLevel?: logLevel;
  /**
   * Prepended to every topic name on the broker (e.g. `staging.`), so several deployments or test
   * runs can share one cluster without seeing each other. Deliveries report the unprefixed name.
   */
  topicPrefix?: string;
  /** The largest record this bus publishes: keep it at or below the broker's `message.max.bytes`. */
  maxRecordBytes?: number;
  /** Dead-letter each bad record once across consumer groups and restarts (the store's ledger). */
  deadLetterLedger?: DeadLetterLedger;
  /** Consumer-group timing (DEFAULT_GROUP_TIMING). */
  group?: Partial<GroupTiming>;
  /** Restarting a consumer kafkajs stopped for good (DEFAULT_CONSUMER_RESTART). */
  consumerRestart?: Partial<ConsumerRestartPolicy>;
  /**
   * Before joining a group, remove the members a dead process of this host left in it (kill -9), so a
   * restart consumes again at once instead of waiting for them (predecessor-eviction.ts). Default true.
   */
  evictDeadMembers?: boolean;
  /** Sign what it publishes, check what it consumes (BusIdentity); absent: unsigned. */
  identity?: BusIdentity;
  /** TLS to the brokers (a CA's PEM, or none for the system's CAs). */
  ssl?: { ca?: string };
  /** The client's login; bus-config.ts sends it over TLS only. */
  sasl?: { mechanism: 'scram-sha-512' | 'scram-sha-256' | 'plain'; username: string; password: string };
}

/**
 * Session 30 s: a live member is dropped only after 30 s without a heartbeat (a handler waiting on the
 * store heartbeats between its retries, so this is slack, not a bound on work). Rebalance 10 s: how long
 * a rebalance waits for every member to rejoin — the wait a restart after kill -9 pays when its dead
 * predecessor cannot be removed (another host). Heartbeat 1 s: members learn of a rebalance, and rejoin,
 * within a second (kafkajs heartbeats only between records and fetches, at most this often).
 */
export const DEFAULT_GROUP_TIMING: GroupTiming = { sessionTimeoutMs: 30_000, rebalanceTimeoutMs: 10_000, heartbeatIntervalMs: 1_000 };

/** kafkajs adapter: idempotent producer, acks=all, commit-after-effect consumers, dead-letter topic. */
export class KafkaBus implements MessageBus {
  readonly adapter = 'kafka' as const;
  readonly maxRecordBytes: number;
  private readonly kafka: Kafka;
  private readonly options: Required<
    Omit<KafkaBusOptions, 'kafkaLogLevel' | 'deadLetterLedger' | 'group' | 'consumerRestart' | 'identity' | 'ssl' | 'sasl'>
  > & {
    group: GroupTiming;
    consumerRestart: ConsumerRestartPolicy;
  };
  private readonly deadLetterLedger?: DeadLetterLedger;
  private readonly identity?: BusIdentity;
  private producer?: Promise<Producer>;
  private topicsReady?: Promise<void>;
  private readonly subscriptions = new Set<KafkaSubscription>();
  private readonly deadLetters = new DeadLetterCounter();
  private closed = false;

  constructor(options: KafkaBusOptions) {
    if (options.brokers.length === 0) throw new Error('KafkaBus needs at least one broker address');
    this.options = {
      clientId: 'robustrl',
      partitions: 3,
      ensureTopics: true,
      commit: { intervalMs: 1_000, threshold: 100 },
      logger: stderrLogger,
      topicPrefix: '',
      maxRecordBytes: DEFAULT_MAX_RECORD_BYTES,
      evictDeadMembers: true,
      ...options,
      group: { ...DEFAULT_GROUP_TIMING, ...options.group },
      consumerRestart: { ...DEFAULT_CONSUMER_RESTART, ...options.consumerRestart },
    };
    this.maxRecordBytes = this.options.maxRecordBytes;
    this.deadLetterLedger = options.deadLetterLedger;
    this.identity = options.identity;
    const logger = this.options.logger;
    const config: KafkaConfig = {
      clientId: this.options.clientId,
      brokers: options.brokers,
      logLevel: options.kafkaLogLevel ?? logLevel.WARN,
      logCreator:
        () =>
        ({ level, log }) => {
          const fields = { ...log, logger: 'kafkajs' } as Record<string, unknown>;
          const msg = String(log.message);
          if (level === logLevel.ERROR) logger.error(msg, fields);
          else if (level === logLevel.WARN) logger.warn(msg, fields);
          else logger.info(msg, fields);
        },
      retry: { initialRetryTime: 100, retries: 8 },
      ...(options.ssl ? { ssl: options.ssl.ca ? { ca: [options.ssl.ca] } : true } : {}),
      ...(options.sasl ? { sasl: { mechanism: options.sasl.mechanism, username: options.sasl.username, password: options.sasl.password } as SASLOptions } : {}),
    };
    this.kafka = new Kafka(config);
  }

  async publish(messages: RobustrlMessage | readonly RobustrlMessage[]): Promise<void> {
    const list = Array.isArray(messages) ? (messages as RobustrlMessage[]) : [messages as RobustrlMessage];
    await publishTraced(list, (records) => this.send(records), this.identity?.signer);
  }

  async publishRaw(record: RawRecord): Promise<void> {
    await this.send([{ topic: record.topic, key: record.key as string, value: record.value as Buffer, headers: record.headers ?? {} }]);
  }

  /** Waits for the broker (docs/contributors/delivery-guarantees.md): a service started before its broker subscribes once it answers. */
  async subscribe(options: SubscribeOptions): Promise<Subscription> {
    if (this.closed) throw new Error('bus is closed');
    return untilAvailable(`the Kafka broker to subscribe ${options.groupId}`, () => this.subscribeNow(options), {
      logger: this.options.logger,
      cancelled: () => this.closed,
    });
  }

  private async subscribeNow(options: SubscribeOptions): Promise<Subscription> {
    await this.ensureTopics();
    if (options.partitions) await this.checkCoPartitioned(options.groupId, options.topics);
    const subscription = new KafkaSubscription(options, {
      kafka: this.kafka,
      topicPrefix: this.options.topicPrefix,
      commit: this.options.commit,
      group: this.options.group,
      restart: this.options.consumerRestart,
      evictDeadMembers: this.options.evictDeadMembers,
      member: THIS_PROCESS,
      maxRecordBytes: this.maxRecordBytes,
      deadLetterLedger: this.deadLetterLedger,
      verifier: this.identity?.verifier,
      logger: this.options.logger,
      deadLetter: (r) => this.publishRaw(r),
      onDeadLettered: (topic, kind) => this.deadLetters.add(topic, kind),
    });
    this.subscriptions.add(subscription);
    try {
      await subscription.start();
    } catch (err) {
      this.subscriptions.delete(subscription);
      await subscription.close().catch(() => undefined);
      throw err;
    }
    return {
      groupId: options.groupId,
      close: async () => {
        this.subscriptions.delete(subscription);
        await subscription.close();
      },
      acknowledge: (positions) => subscription.acknowledge(positions),
    };
  }

  deadLetterCounts(): DeadLetterCount[] {
    return this.deadLetters.snapshot();
  }

  private healthAdmin?: Admin;
  private healthAdminConnected = false;

  async health(): Promise<BusHealth> {
    const open = [...this.subscriptions];
    const subscriptions: SubscriptionHealth[] = open.map((s) => ({ ...s.health(), lag: null }));
    // One admin connection for every probe while it works (a service samples its health every second):
    // a probe that fails drops it, and the next one connects afresh.
    const admin = (this.healthAdmin ??= this.kafka.admin({ retry: { retries: 0 } }));
    try {
      if (!this.healthAdminConnected) {
        await withTimeout(admin.connect(), HEALTH_TIMEOUT_MS, 'connecting to the broker');
        this.healthAdminConnected = true;
      }
      await withTimeout(admin.describeCluster(), HEALTH_TIMEOUT_MS, 'describing the cluster');
      for (const [i, sub] of subscriptions.entries()) {
        sub.lag = await withTimeout(
          this.lagOf(admin, sub.groupId, open[i].topics, open[i].handledPositions(), (p) => open[i].consumes(p)),
          HEALTH_TIMEOUT_MS,
          `reading the lag of ${sub.groupId}`,
        ).catch(() => null);
      }
      return { reachable: true, subscriptions };
    } catch (err) {
      this.healthAdmin = undefined;
      this.healthAdminConnected = false;
      await admin.disconnect().catch(() => undefined);
      return { reachable: false, error: err instanceof Error ? err.message : String(err), subscriptions };
    }
  }

  /**
   * Log-end offsets minus where the group stands over its topics: the committed offset, or further where
   * this process has handled past it (a subscription that commits only on acknowledgement is not behind
   * for records it handled since its last acknowledgement). A partition never committed counts from its start.
   */
  private async lagOf(
    admin: Admin,
    groupId: string,
    topics: readonly string[],
    handled: readonly PartitionPosition[],
    consumes: (partition: number) => boolean,
  ): Promise<number> {
    const handledAt = new Map(handled.map((h) => [`${this.options.topicPrefix}${h.topic}\u0000${h.partition}`, Number(h.nextOffset)]));
    const prefixed = topics.map((t) => this.options.topicPrefix + t);
    const committed = await admin.fetchOffsets({ groupId: this.options.topicPrefix + groupId, topics: prefixed });
    let lag = 0;
    for (const topic of prefixed) {
      const ends = await admin.fetchTopicOffsets(topic);
      const byPartition = new Map((committed.find((c) => c.topic === topic)?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
      for (const end of ends) {
        if (!consumes(end.partition)) continue; // another shard's
        const at = Math.max(byPartition.get(end.partition) ?? -1, handledAt.get(`${topic}\u0000${end.partition}`) ?? -1);
        lag += Number(end.high) - (at < 0 ? Number(end.low) : at);
      }
    }
    return lag;
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    this.subscriptions.clear();
    await this.healthAdmin?.disconnect().catch(() => undefined);
    this.healthAdmin = undefined;
    if (this.producer) await (await this.producer).disconnect();
  }

  /** Create the robustrl topics once; "already exists" is fine (several services race to do this). */
  ensureTopics(): Promise<void> {
    if (!this.options.ensureTopics) return Promise.resolve();
    this.topicsReady ??= (async () => {
      // A broker that just started, or is busy creating other topics, can answer a metadata request
      // with UNKNOWN_TOPIC_OR_PARTITION for a topic it has just created: retriable, so retry it.
      for (let attempt = 1; ; attempt++) {
        try {
          await this.createMissingTopics();
          return;
        } catch (err) {
          // kafkajs's own flag, read strictly (not errors.ts's wider rule): only what kafkajs itself marks
          // retriable is tried again here; a subscriber waits out a broker that is down around this
          // (wait-for-dependency.ts).
          if ((err as { retriable?: boolean }).retriable !== true || attempt >= 5) throw err;
          this.options.logger.warn('creating topics failed, retrying', { attempt, error: String(err) });
          await new Promise((r) => setTimeout(r, 500 * attempt));
        }
      }
    })().catch((err) => {
      this.topicsReady = undefined;
      throw err;
    });
    return this.topicsReady;
  }

  /**
   * A group given some partitions reads the same partition numbers of every topic: that holds one job's
   * records only if each topic has as many partitions (a job's records go to hash(job id) mod count).
   */
  private async checkCoPartitioned(groupId: string, topics: readonly string[]): Promise<void> {
    const admin: Admin = this.kafka.admin();
    await admin.connect();
    try {
      const { topics: metadata } = await admin.fetchTopicMetadata({ topics: topics.map((t) => this.options.topicPrefix + t) });
      const counts = new Map(metadata.map((t) => [t.name.slice(this.options.topicPrefix.length), t.partitions.length]));
      if (new Set(counts.values()).size > 1) {
        const listed = [...counts].map(([t, n]) => `${t} has ${n}`).join(', ');
        throw new NotCoPartitionedError(
          `consumer group '${groupId}' reads some partitions of its topics (a shard), which needs every topic to have as many partitions, so that one job's records are in the same shard on each: ${listed}`,
        );
      }
    } finally {
      await admin.disconnect();
    }
  }

  private async createMissingTopics(): Promise<void> {
    const admin: Admin = this.kafka.admin();
    await admin.connect();
    try {
      const existing = new Set(await admin.listTopics());
      const missing = [...ALL_TOPICS, DEAD_LETTER_TOPIC].map((t) => this.options.topicPrefix + t).filter((t) => !existing.has(t));
      if (missing.length > 0) {
        await admin.createTopics({
          waitForLeaders: true,
          topics: missing.map((topic) => ({ topic, numPartitions: this.options.partitions, replicationFactor: -1 })),
        });
      }
    } finally {
      await admin.disconnect();
    }
  }

  /** The one place records reach the broker; topics are logical here and get the prefix on the wire. */
  private async send(records: OutboundRecord[]): Promise<void> {
    if (this.closed) throw new Error('bus is closed');
    // Refused here with a clear error rather than by the broker after the producer's retries.
    for (const r of records) {
      const bytes = recordBytes(r);
      if (bytes > this.maxRecordBytes) throw new RecordTooLargeError(r.topic, bytes, this.maxRecordBytes);
    }
    const producer = await this.getProducer();
    // The broker refuses a record batch larger than its limit: a long list goes in requests that each
    // stay under it, one after the other (per-key order holds).
    for (const chunk of underLimit(records, this.maxRecordBytes)) {
      const byTopic = new Map<string, OutboundRecord[]>();
      for (const r of chunk) {
        const topic = this.options.topicPrefix + r.topic;
        const list = byTopic.get(topic);
        if (list) list.push(r);
        else byTopic.set(topic, [r]);
      }
      await producer.sendBatch({
        acks: -1,
        topicMessages: [...byTopic].map(([topic, rs]) => ({
          topic,
          messages: rs.map((r) => ({ key: r.key, value: r.value, headers: r.headers })),
        })),
      });
    }
  }

  private getProducer(): Promise<Producer> {
    this.producer ??= (async () => {
      await this.ensureTopics();
      // Idempotent + one in-flight request: retries never duplicate or reorder a job's records.
      const producer = this.kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
      await producer.connect();
      return producer;
    })().catch((err) => {
      this.producer = undefined;
      throw err;
    });
    return this.producer;
  }
}

/** How long a readiness check waits for the broker before calling it unreachable. */
const HEALTH_TIMEOUT_MS = 3_000;

function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms ${what}`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** Consecutive runs of `records` whose bytes add up to at most `limit` (a record alone may reach it). */
function underLimit(records: OutboundRecord[], limit: number): OutboundRecord[][] {
  const chunks: OutboundRecord[][] = [];
  let current: OutboundRecord[] = [];
  let bytes = 0;
  for (const r of records) {
    const size = recordBytes(r) + 64; // the record's own framing in the batch
    if (current.length > 0 && bytes + size > limit) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(r);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/** Topics a sharded subscription reads differ in partition count: a setting to fix, not a dependency to wait for. */
export class NotCoPartitionedError extends RobustrlError {
  constructor(message: string) {
    super(message, { retriable: false });
  }
}
