import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { DEAD_LETTER_TOPIC, RobustrlMessage } from '@robustrl/contracts';
import { DeadLetterCount, DeadLetterCounter } from '../dead-letter-counts';
import { InboundRecord, processInbound, processInboundBatch, retryPolicy, SubscriptionClosingError } from '../inbound';
import {
  BatchHandler,
  BusHealth,
  BusLogger,
  DeadLetterLedger,
  DEFAULT_MAX_RECORD_BYTES,
  MessageBus,
  MessageHandler,
  RawRecord,
  recordBytes,
  RecordTooLargeError,
  stderrLogger,
  PartitionPosition,
  BusIdentity,
  SubscribeOptions,
  Subscription,
} from '../message-bus';
import { OutboundRecord, publishTraced } from '../outbound';
import type { DeadLetterKind } from '../dead-letter';
import { partitionFor } from './partitioner';

type PartitionConsumer = { handler: MessageHandler; batchHandler?: undefined } | { handler?: undefined; batchHandler: BatchHandler; maxBatchSize: number };

interface StoredRecord {
  offset: number;
  key: string | null;
  value: Buffer | null;
  headers: Record<string, string>;
}

/** An append-only partition with a wake-up for consumers waiting at its end. */
class PartitionLog {
  readonly records: StoredRecord[] = [];
  private waiters: Array<() => void> = [];

  append(record: Omit<StoredRecord, 'offset'>): void {
    this.records.push({ ...record, offset: this.records.length });
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves when a record at `offset` exists or `signal` fires. */
  waitFor(offset: number, signal: AbortSignal): Promise<void> {
    if (offset < this.records.length || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        signal.removeEventListener('abort', wake);
        resolve();
      };
      this.waiters.push(wake);
      signal.addEventListener('abort', wake, { once: true });
    });
  }
}

export interface InProcessBusOptions {
  partitions?: number;
  /** The largest record accepted, as a broker's `message.max.bytes` (default: Kafka's, less framing). */
  maxRecordBytes?: number;
  /** Dead-letter each bad record once across consumer groups (the store's ledger). */
  deadLetterLedger?: DeadLetterLedger;
  logger?: BusLogger;
  /** Sign what it publishes, check what it consumes (BusIdentity); absent: unsigned. */
  identity?: BusIdentity;
}

/**
 * The bus in one process, for the embedded mode and unit tests, with Kafka's contract: topics split
 * into partitions by key hash, committed offsets per consumer group (kept across subscriptions, so a
 * restarted consumer resumes where it stopped), records serialised to bytes and validated on the way
 * in exactly as from Kafka. Not durable across process restarts: that is what Kafka is for.
 */
export class InProcessBus implements MessageBus {
  readonly adapter = 'in-process' as const;
  readonly maxRecordBytes: number;
  private readonly deadLetterLedger?: DeadLetterLedger;
  /** This bus's logs live and die with it: ledger keys carry its id so another bus's offsets never collide. */
  private readonly instanceId = randomUUID();
  private readonly topics = new Map<string, PartitionLog[]>();
  private readonly committed = new Map<string, number>();
  /** Per open subscription's partition (same keys as `committed`): the offset after the last record it handled. */
  private readonly handled = new Map<string, number>();
  /** Open subscriptions: group → its topics and the partitions it reads of them. */
  private readonly activeGroups = new Map<string, Pick<SubscribeOptions, 'topics' | 'partitions'>>();
  private readonly subscriptions = new Set<Subscription>();
  private readonly partitions: number;
  private readonly logger: BusLogger;
  private readonly deadLetters = new DeadLetterCounter();
  private readonly identity?: BusIdentity;
  private closed = false;

  constructor(options: InProcessBusOptions = {}) {
    this.partitions = options.partitions ?? 3;
    this.maxRecordBytes = options.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
    this.deadLetterLedger = options.deadLetterLedger;
    this.logger = options.logger ?? stderrLogger;
    this.identity = options.identity;
  }

  async publish(messages: RobustrlMessage | readonly RobustrlMessage[]): Promise<void> {
    const list = Array.isArray(messages) ? (messages as RobustrlMessage[]) : [messages as RobustrlMessage];
    await publishTraced(
      list,
      async (records: OutboundRecord[]) => {
        for (const r of records) this.append(r);
      },
      this.identity?.signer,
    );
  }

  async publishRaw(record: RawRecord): Promise<void> {
    this.append({
      topic: record.topic,
      key: record.key,
      value: record.value === null ? null : Buffer.from(record.value),
      headers: record.headers ?? {},
    });
  }

  async health(): Promise<BusHealth> {
    const subscriptions = [...this.activeGroups].map(([groupId, { topics, partitions }]) => {
      let lag = 0;
      for (const topic of topics) {
        this.logsOf(topic).forEach((log, partition) => {
          if (partitions && !partitions(partition)) return;
          const key = `${groupId}\u0000${topic}\u0000${partition}`;
          lag += log.records.length - Math.max(this.committed.get(key) ?? 0, this.handled.get(key) ?? 0);
        });
      }
      // The partition loops never stop on an error (a failed dead-letter write is retried in place): nothing to restart.
      return { groupId, running: true, restarts: 0, lag };
    });
    return { reachable: !this.closed, ...(this.closed ? { error: 'bus is closed' } : {}), subscriptions };
  }

  deadLetterCounts(): DeadLetterCount[] {
    return this.deadLetters.snapshot();
  }

  /** Read a topic from the start, e.g. the dead-letter topic in tests. */
  read(topic: string): Array<InboundRecord> {
    return this.logsOf(topic).flatMap((log, partition) =>
      log.records.map((r) => ({ topic, partition, offset: String(r.offset), key: r.key, value: r.value, headers: r.headers })),
    );
  }

  async subscribe(options: SubscribeOptions): Promise<Subscription> {
    if (this.closed) throw new Error('bus is closed');
    if (this.activeGroups.has(options.groupId)) {
      throw new Error(`consumer group '${options.groupId}' already has an active subscription in this process`);
    }
    this.activeGroups.set(options.groupId, { topics: options.topics, partitions: options.partitions });
    const abort = new AbortController();
    // One waiting listener per partition loop (removed on every wake-up): many topics × partitions
    // legitimately exceed Node's leak-warning default of 10.
    setMaxListeners(0, abort.signal);
    const pipeline = {
      groupId: options.groupId,
      types: options.types ? new Set(options.types) : undefined,
      retry: retryPolicy(options.retry),
      deadLetter: (r: RawRecord) => this.publishRaw(r),
      onDeadLettered: (topic: string, kind: DeadLetterKind) => this.deadLetters.add(topic, kind),
      maxRecordBytes: this.maxRecordBytes,
      logger: this.logger,
      isRunning: () => !abort.signal.aborted,
      ...(this.identity?.verifier ? { verifier: this.identity.verifier } : {}),
    };
    const fromBeginning = options.fromBeginning ?? true;
    const loops: Promise<void>[] = [];
    for (const topic of options.topics) {
      this.logsOf(topic).forEach((log, partition) => {
        if (options.partitions && !options.partitions(partition)) return; // another shard's
        const key = `${options.groupId}\u0000${topic}\u0000${partition}`;
        if (!this.committed.has(key)) this.committed.set(key, fromBeginning ? 0 : log.records.length);
        // Ledger keys name this bus instance and topic: its offsets mean nothing beyond it.
        const ledger = this.deadLetterLedger ? { ledger: { ledger: this.deadLetterLedger, stream: `in-process:${this.instanceId}:${topic}` } } : {};
        this.handled.set(key, this.committed.get(key)!);
        const consume: PartitionConsumer = options.batchHandler
          ? { batchHandler: options.batchHandler, maxBatchSize: options.maxBatchSize ?? 5_000 }
          : { handler: options.handler };
        loops.push(this.consumePartition(topic, partition, log, key, { ...pipeline, ...ledger }, consume, options.commit === 'acknowledged', abort.signal));
      });
    }
    const subscription: Subscription = {
      groupId: options.groupId,
      close: async () => {
        abort.abort();
        await Promise.all(loops);
        this.activeGroups.delete(options.groupId);
        this.subscriptions.delete(subscription);
        for (const key of [...this.handled.keys()]) if (key.startsWith(`${options.groupId}\u0000`)) this.handled.delete(key);
      },
      acknowledge: async (positions: readonly PartitionPosition[]) => {
        for (const p of positions) this.committed.set(`${options.groupId}\u0000${p.topic}\u0000${p.partition}`, Number(p.nextOffset));
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
  }

  /**
   * One partition's loop: from where the group stands, record by record (or batch by batch, as many as
   * are there). The subscription's position is `handled`; with `acknowledged` commits the group's
   * `committed` moves only on acknowledge, so a new subscription of the group starts over from there.
   */
  private async consumePartition(
    topic: string,
    partition: number,
    log: PartitionLog,
    commitKey: string,
    pipeline: Omit<Parameters<typeof processInbound>[1], 'handler'>,
    consume: PartitionConsumer,
    acknowledged: boolean,
    signal: AbortSignal,
  ): Promise<void> {
    while (!signal.aborted) {
      const offset = this.handled.get(commitKey)!;
      await log.waitFor(offset, signal);
      if (signal.aborted) return;
      try {
        let next: number;
        if (consume.batchHandler) {
          const upTo = Math.min(log.records.length, offset + consume.maxBatchSize);
          const records = log.records
            .slice(offset, upTo)
            .map((r) => ({ topic, partition, offset: String(r.offset), key: r.key, value: r.value, headers: r.headers }));
          await processInboundBatch(records, { ...pipeline, batchHandler: consume.batchHandler });
          next = upTo;
        } else {
          const r = log.records[offset];
          await processInbound(
            { topic, partition, offset: String(offset), key: r.key, value: r.value, headers: r.headers },
            { ...pipeline, handler: consume.handler },
          );
          next = offset + 1;
        }
        this.handled.set(commitKey, next);
        if (!acknowledged) this.committed.set(commitKey, next);
      } catch (err) {
        if (err instanceof SubscriptionClosingError) return;
        // The dead-letter write itself failed: keep the record uncommitted and try again shortly.
        this.logger.error('record could not be handled or dead-lettered; retrying', { topic, partition, offset, error: String(err) });
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  private append(record: { topic: string; key: string | null; value: Buffer | null; headers: Record<string, string> }): void {
    if (this.closed && record.topic !== DEAD_LETTER_TOPIC) throw new Error('bus is closed');
    const bytes = recordBytes(record);
    if (bytes > this.maxRecordBytes) throw new RecordTooLargeError(record.topic, bytes, this.maxRecordBytes);
    const logs = this.logsOf(record.topic);
    logs[partitionFor(record.key, logs.length)].append({ key: record.key, value: record.value, headers: record.headers });
  }

  private logsOf(topic: string): PartitionLog[] {
    let logs = this.topics.get(topic);
    if (!logs) {
      logs = Array.from({ length: this.partitions }, () => new PartitionLog());
      this.topics.set(topic, logs);
    }
    return logs;
  }
}
