import { Cluster, Consumer, IHeaders, Kafka, KafkaMessage } from 'kafkajs';
import { InboundRecord, processInbound, processInboundBatch, retryPolicy, SubscriptionClosingError } from '../inbound';
import type { DeadLetterKind } from '../dead-letter';
import { BusLogger, DeadLetterLedger, RawRecord, PartitionPosition, SubscribeOptions, Subscription, SubscriptionHealth } from '../message-bus';
import type { RecordVerifier } from '../identity/record-identity';
import { MemberTag, taggedRoundRobin } from './member-identity';
import { evictDeadPredecessors } from './predecessor-eviction';
import { ConsumerRestartPolicy, restartDelayMs } from './restart-backoff';

/** How many partitions a batch subscription has in hand at once (kafkajs keeps each partition's own order). */
const BATCH_PARTITIONS_IN_PARALLEL = 4;

/** Consumer-group timing; see KafkaBusOptions.group. */
export interface GroupTiming {
  sessionTimeoutMs: number;
  rebalanceTimeoutMs: number;
  heartbeatIntervalMs: number;
}

/** What a subscription takes from its bus. */
export interface KafkaSubscriptionContext {
  kafka: Kafka;
  topicPrefix: string;
  commit: { intervalMs: number; threshold: number };
  group: GroupTiming;
  restart: ConsumerRestartPolicy;
  /** Remove dead members this host left in the group before joining (predecessor-eviction.ts). */
  evictDeadMembers: boolean;
  member: MemberTag;
  maxRecordBytes: number;
  deadLetterLedger?: DeadLetterLedger;
  verifier?: RecordVerifier;
  logger: BusLogger;
  deadLetter(record: RawRecord): Promise<void>;
  onDeadLettered(topic: string, kind: DeadLetterKind): void;
}

/**
 * One subscription of the Kafka adapter: a consumer group member that is kept running. kafkajs restarts a
 * consumer by itself after a retriable error, and stops it for good after any other (CRASH with
 * `restart: false`: a non-retriable protocol error, a bug surfacing as a TypeError, an incompatible group
 * member). The subscription then starts a new consumer in the same group, with backoff, which resumes from
 * the group's committed offsets — so nothing is skipped and nothing committed twice: the crashed consumer
 * committed only offsets whose handler had resolved, like any other. Readiness shows `running: false` only
 * while no consumer is up.
 */
export class KafkaSubscription implements Subscription {
  readonly groupId: string;
  private readonly brokerGroupId: string;
  private consumer?: Consumer;
  private starting?: Promise<void>;
  private restartTimer?: NodeJS.Timeout;
  private closing = false;
  private running = false;
  private error?: string;
  private restarts = 0;
  /** Crashes since the consumer last stayed up for a while: what the restart backoff grows with. */
  private consecutiveCrashes = 0;
  private joinedAt?: number;
  /** Per `topic\u0000partition` (topic without the prefix): the offset after the last record handled by this process. */
  private readonly handled = new Map<string, bigint>();

  constructor(
    private readonly options: SubscribeOptions,
    private readonly ctx: KafkaSubscriptionContext,
  ) {
    this.groupId = options.groupId;
    // Prefixed like the topics: deployments sharing a cluster must not share consumer groups either (a
    // group spanning two deployments rebalances with both, and waits out the other's dead members).
    this.brokerGroupId = ctx.topicPrefix + options.groupId;
  }

  /** Starts the first consumer; rejects when it cannot connect or subscribe (the service then fails to start, as before). */
  start(): Promise<void> {
    this.starting = this.startConsumer();
    return this.starting;
  }

  health(): Omit<SubscriptionHealth, 'lag'> {
    return { groupId: this.groupId, running: this.running, restarts: this.restarts, ...(this.error ? { error: this.error } : {}) };
  }

  get topics(): readonly string[] {
    return this.options.topics;
  }

  /** Whether the group consumes this partition of its topics (a sharded group consumes only its shard's). */
  consumes(partition: number): boolean {
    return this.options.partitions?.(partition) ?? true;
  }

  /** Where this process has handled up to, per partition it read (lag counts from here, not only from the committed offsets). */
  handledPositions(): PartitionPosition[] {
    return [...this.handled].map(([key, next]) => {
      const [topic, partition] = key.split('\u0000');
      return { topic, partition: Number(partition), nextOffset: next.toString() };
    });
  }

  async acknowledge(positions: readonly PartitionPosition[]): Promise<void> {
    if (positions.length === 0) return;
    if (!this.consumer) throw new Error(`subscription ${this.groupId} has no consumer to commit with`);
    await this.consumer.commitOffsets(positions.map((p) => ({ topic: this.ctx.topicPrefix + p.topic, partition: p.partition, offset: p.nextOffset })));
  }

  async close(): Promise<void> {
    this.closing = true;
    clearTimeout(this.restartTimer);
    await this.starting?.catch(() => undefined);
    this.running = false;
    // disconnect() waits for the running batch, then commits every resolved offset and leaves the group.
    await this.consumer?.disconnect();
  }

  private async startConsumer(): Promise<void> {
    const { ctx, options } = this;
    const logger = ctx.logger;
    let cluster: Cluster | undefined;
    const consumer = ctx.kafka.consumer({
      groupId: this.brokerGroupId,
      partitionAssigners: [taggedRoundRobin(ctx.member, (c) => (cluster = c), options.partitions)],
      allowAutoTopicCreation: false,
      sessionTimeout: ctx.group.sessionTimeoutMs,
      heartbeatInterval: ctx.group.heartbeatIntervalMs,
      rebalanceTimeout: ctx.group.rebalanceTimeoutMs,
      // An idle fetch long-polls this long, and disconnect() waits for it: 1 s keeps shutdown quick
      // at the cost of one empty fetch per second per idle consumer.
      maxWaitTimeInMs: 1_000,
      // A batch consumer takes what a busy partition has in larger fetches: fewer, larger transactions.
      ...(options.batchHandler ? { maxBytesPerPartition: 4 * 1024 * 1024, maxBytes: 16 * 1024 * 1024 } : {}),
    });
    this.consumer = consumer;
    consumer.on(consumer.events.CRASH, (e) => this.onCrash(consumer, e.payload.error, e.payload.restart));
    consumer.on(consumer.events.GROUP_JOIN, () => {
      this.running = true;
      this.error = undefined;
      this.joinedAt = Date.now();
    });
    await consumer.connect();
    if (ctx.evictDeadMembers && cluster) {
      // Best effort: without it the join still succeeds, after waiting for the dead member.
      await evictDeadPredecessors(cluster, this.brokerGroupId, ctx.member, logger).catch((err: unknown) =>
        logger.warn('could not look for dead members of this host in the group; joining without', { group: options.groupId, error: String(err) }),
      );
    }
    const prefix = ctx.topicPrefix;
    await consumer.subscribe({ topics: options.topics.map((t) => prefix + t), fromBeginning: options.fromBeginning ?? true });
    const types = options.types ? new Set(options.types) : undefined;
    const retry = retryPolicy(options.retry);
    const acknowledged = options.commit === 'acknowledged';
    const isRunningNow = (isRunning: () => boolean) => () => !this.closing && consumer === this.consumer && isRunning();
    if (options.batchHandler) {
      const batchHandler = options.batchHandler;
      const maxBatch = options.maxBatchSize ?? 5_000;
      await consumer.run({
        autoCommit: !acknowledged,
        autoCommitInterval: ctx.commit.intervalMs,
        autoCommitThreshold: ctx.commit.threshold,
        eachBatchAutoResolve: false,
        // Partitions (jobs) in parallel, each in order: one partition's batch commits while the next is decided.
        partitionsConsumedConcurrently: BATCH_PARTITIONS_IN_PARALLEL,
        eachBatch: async ({ batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, isRunning, isStale }) => {
          const topic = batch.topic.slice(prefix.length);
          for (let from = 0; from < batch.messages.length; from += maxBatch) {
            if (!isRunning() || isStale()) return;
            const chunk = batch.messages.slice(from, from + maxBatch);
            const records = chunk.map((m) => inboundRecord(topic, batch.partition, m));
            try {
              await processInboundBatch(records, {
                groupId: options.groupId,
                batchHandler,
                types,
                retry,
                deadLetter: ctx.deadLetter,
                onDeadLettered: ctx.onDeadLettered,
                maxRecordBytes: ctx.maxRecordBytes,
                ...(ctx.deadLetterLedger ? { ledger: { ledger: ctx.deadLetterLedger, stream: `kafka:${batch.topic}` } } : {}),
                ...(ctx.verifier ? { verifier: ctx.verifier } : {}),
                logger,
                heartbeat,
                isRunning: isRunningNow(isRunning),
              });
            } catch (err) {
              if (err instanceof SubscriptionClosingError) return;
              throw err;
            }
            const last = chunk[chunk.length - 1].offset;
            resolveOffset(last);
            this.handled.set(`${topic}\u0000${batch.partition}`, BigInt(last) + 1n);
            if (!acknowledged) await commitOffsetsIfNecessary();
            await heartbeat();
          }
        },
      });
      return;
    }
    await consumer.run({
      autoCommit: !acknowledged,
      autoCommitInterval: ctx.commit.intervalMs,
      autoCommitThreshold: ctx.commit.threshold,
      // We resolve an offset ourselves, only after its handler's effect is durable.
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, isRunning, isStale }) => {
        for (const m of batch.messages) {
          if (!isRunning() || isStale()) return;
          try {
            await processInbound(inboundRecord(batch.topic.slice(prefix.length), batch.partition, m), {
              groupId: options.groupId,
              handler: options.handler!,
              types,
              retry,
              deadLetter: ctx.deadLetter,
              onDeadLettered: ctx.onDeadLettered,
              maxRecordBytes: ctx.maxRecordBytes,
              // Keyed by the topic as the broker names it: deployments sharing a cluster differ by prefix.
              ...(ctx.deadLetterLedger ? { ledger: { ledger: ctx.deadLetterLedger, stream: `kafka:${batch.topic}` } } : {}),
              ...(ctx.verifier ? { verifier: ctx.verifier } : {}),
              logger,
              heartbeat,
              isRunning: isRunningNow(isRunning),
            });
          } catch (err) {
            if (err instanceof SubscriptionClosingError) return;
            throw err; // not handled nor dead-lettered: kafkajs retries the batch from this record (and, out of retries, restarts)
          }
          resolveOffset(m.offset);
          this.handled.set(`${batch.topic.slice(prefix.length)}\u0000${batch.partition}`, BigInt(m.offset) + 1n);
          if (!acknowledged) await commitOffsetsIfNecessary();
          await heartbeat();
        }
      },
    });
  }

  private onCrash(consumer: Consumer, error: Error, kafkajsRestarts: boolean): void {
    if (this.closing || consumer !== this.consumer) return;
    this.running = false;
    this.error = describeConsumerError(error, this.groupId);
    // A consumer that stayed up a while crashed afresh: start the backoff over.
    if (this.joinedAt !== undefined && Date.now() - this.joinedAt >= this.ctx.restart.stableAfterMs) this.consecutiveCrashes = 0;
    this.joinedAt = undefined;
    this.consecutiveCrashes += 1;
    if (kafkajsRestarts) {
      this.restarts += 1;
      this.ctx.logger.error('consumer crashed; kafkajs restarts it from the last committed offset', {
        group: this.groupId,
        error: this.error,
        restarts: this.restarts,
      });
      return;
    }
    this.scheduleRestart();
  }

  private scheduleRestart(): void {
    const delayMs = restartDelayMs(this.consecutiveCrashes, this.ctx.restart);
    this.ctx.logger.error('consumer crashed and stopped; the bus restarts it in the same group from the committed offsets', {
      group: this.groupId,
      error: this.error,
      inMs: delayMs,
      restarts: this.restarts,
    });
    this.restartTimer = setTimeout(() => {
      this.starting = this.restart();
    }, delayMs);
  }

  private async restart(): Promise<void> {
    if (this.closing) return;
    this.restarts += 1;
    const dead = this.consumer;
    // kafkajs disconnected it before reporting the crash; this only makes sure its connections are gone.
    await dead?.disconnect().catch(() => undefined);
    try {
      await this.startConsumer();
      this.ctx.logger.warn('consumer restarted', { group: this.groupId, restarts: this.restarts });
    } catch (err) {
      if (this.closing) return;
      this.error = describeConsumerError(err, this.groupId);
      this.consecutiveCrashes += 1;
      await this.consumer?.disconnect().catch(() => undefined);
      this.scheduleRestart();
    }
  }
}

function inboundRecord(topic: string, partition: number, m: KafkaMessage): InboundRecord {
  return { topic, partition, offset: m.offset, key: m.key ? m.key.toString('utf8') : null, value: m.value, headers: headersToStrings(m.headers) };
}

function headersToStrings(headers: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers ?? {})) {
    if (v === undefined) continue;
    const first = Array.isArray(v) ? v[0] : v;
    out[k] = Buffer.isBuffer(first) ? first.toString('utf8') : String(first);
  }
  return out;
}

/**
 * A consumer's error as health reports it. kafkajs reports a broker that refuses a group's coordinator
 * lookup (GROUP_AUTHORIZATION_FAILED: the login has no ACL on the group) as a coordinator it could not
 * find: the likelier causes are named, so an operator does not go looking for a broken broker.
 */
export function describeConsumerError(err: unknown, groupId: string): string {
  const text = String(err);
  return (err as { name?: string })?.name === 'KafkaJSGroupCoordinatorNotFound'
    ? `${text} (for group ${groupId}: on a broker with ACLs, this login may not be allowed the group; else the broker is still starting)`
    : text;
}
