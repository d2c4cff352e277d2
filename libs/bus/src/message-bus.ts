import { MessageType, RobustrlMessage } from '@robustrl/contracts';
import type { DeadLetterCount } from './dead-letter-counts';
import type { RawRecord } from './raw-record';
import type { RecordSigner, RecordVerifier } from './identity/record-identity';

export { DEFAULT_MAX_RECORD_BYTES, RawRecord, recordBytes, RecordTooLargeError } from './raw-record';

/**
 * Who this process is on the bus (identity/record-identity.ts): it signs what it publishes with
 * `signer`, and dead-letters what it consumes that `verifier` refuses. Both absent: an unsigned
 * deployment (the embedded main, a developer's machine).
 */
export interface BusIdentity {
  signer?: RecordSigner;
  verifier?: RecordVerifier;
}

/**
 * The bus port. Two adapters honour one contract (tested by one suite):
 *  - per-key order: records with one key (the job id) are handled in the order published;
 *  - at-least-once: a record counts as consumed only after its handler resolved, i.e. after the
 *    handler's effect is durable; a handler that throws sees the record again;
 *  - bad input never blocks: an invalid record, or one whose handler keeps failing, is written to the
 *    dead-letter topic with the reason and the original bytes, and the partition moves on.
 * Handlers must therefore be idempotent (see @robustrl/store `applyOnce`).
 */
export interface MessageBus {
  readonly adapter: 'kafka' | 'in-process';
  /**
   * The largest record (value, key and headers) the bus accepts; a larger one is refused on publish.
   * A dead letter that would exceed it is written as a reference to the original instead of a copy.
   */
  readonly maxRecordBytes: number;
  /** Publish messages to their catalog topics, keyed by job id. Resolves once durable (acks=all). */
  publish(messages: RobustrlMessage | readonly RobustrlMessage[]): Promise<void>;
  /** Publish bytes as they are: for bridges and tests of bad input. */
  publishRaw(record: RawRecord): Promise<void>;
  subscribe(options: SubscribeOptions): Promise<Subscription>;
  /** Graceful: waits for in-flight handlers, commits what they finished. */
  close(): Promise<void>;
  /**
   * Whether the bus can do its work now, for readiness probes: the broker reachable, and per open
   * subscription whether its consumer is running and how far it lags (null when it cannot be known).
   * Never throws; answers within a few seconds even when the broker is down.
   */
  health(): Promise<BusHealth>;
  /** Dead letters this bus has written since it was created, per original topic and reason (metrics). */
  deadLetterCounts(): DeadLetterCount[];
}

export interface SubscriptionHealth {
  groupId: string;
  /** False while the consumer is down: crashed and not yet back (the bus restarts it), or not yet joined. */
  running: boolean;
  /** Times the consumer was restarted after it crashed, by the client library itself or by the bus. */
  restarts: number;
  /** Records published but not yet committed by the group, over its topics; null while unknown. */
  lag: number | null;
  error?: string;
}

export interface BusHealth {
  reachable: boolean;
  error?: string;
  subscriptions: SubscriptionHealth[];
}

export interface Delivery<M extends RobustrlMessage = RobustrlMessage> {
  readonly message: M;
  readonly topic: string;
  readonly partition: number;
  /** Kafka offset as a decimal string (int64 does not fit a JS number in general). */
  readonly offset: string;
  readonly key: string | null;
  readonly headers: Readonly<Record<string, string>>;
  readonly groupId: string;
  /** 1 on first delivery, >1 when redelivered in-process after a handler failure. */
  readonly attempt: number;
}

export type MessageHandler = (delivery: Delivery) => Promise<void>;

/**
 * Records of one partition, in offset order: the valid ones of the types asked for. Invalid records in
 * the same range were dead-lettered and filtered types skipped before the batch was formed.
 */
export interface DeliveryBatch {
  readonly topic: string;
  readonly partition: number;
  readonly deliveries: readonly Delivery[];
  /** The offset after the last record of the range (valid or not): where the partition goes on once the batch is handled. */
  readonly nextOffset: string;
  readonly groupId: string;
  /** 1 on first delivery, >1 when the same batch is handed again after the handler failed. */
  readonly attempt: number;
}

export type BatchHandler = (batch: DeliveryBatch) => Promise<void>;

/** Where a partition of a subscription stands: `nextOffset` is the first record not yet covered. */
export interface PartitionPosition {
  topic: string;
  partition: number;
  nextOffset: string;
}

export interface RetryPolicy {
  /** Attempts before a failing record is dead-lettered (1 = no retry). */
  maxAttempts: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 5, initialBackoffMs: 100, maxBackoffMs: 5_000 };

/**
 * Who writes the dead letter of a bad record when several consumers read it: every consumer group that
 * reads a topic meets the same bad record (the detector, the controller, each agent, a read model that
 * joins a fresh group on every start), and each would dead-letter its own copy. A bus given a ledger
 * dead-letters a record once: `claim` answers true for the first group to claim the record, and again
 * for that same group (its own redelivery after a crash), false for every other; those skip the write
 * and move on. Claims are durable, so restarts and new groups do not write again.
 */
export interface DeadLetterLedger {
  claim(record: { stream: string; partition: number; offset: string }, groupId: string): Promise<boolean>;
  /** The claimed dead letter is written: a later claim by the same group (a replay) answers false. */
  written?(record: { stream: string; partition: number; offset: string }, groupId: string): Promise<void>;
}

export type SubscribeOptions = (
  | { handler: MessageHandler; batchHandler?: undefined }
  | {
      handler?: undefined;
      /**
       * Instead of `handler`: the records of one partition at a time, in order, as many as the bus has
       * at hand (at most `maxBatchSize`). At-least-once for the whole batch: its records count as
       * consumed only after the handler resolved; a handler that throws gets the batch again (an
       * unavailable dependency is waited out without limit). A batch that keeps failing for its own
       * sake is split into single records, so only the bad record is dead-lettered.
       */
      batchHandler: BatchHandler;
      maxBatchSize?: number;
    }
) &
  SubscribeCommon;

interface SubscribeCommon {
  groupId: string;
  topics: readonly string[];
  /**
   * `handled` (default): the group's committed offsets follow the handlers.
   * `acknowledged`: they move only when the subscriber calls `Subscription.acknowledge` — for a
   * consumer whose durable state is a snapshot taken now and then: after a restart or a rebalance the
   * group resumes at its last snapshot, and the records after it are delivered again. While the
   * subscription runs, a record it handled is not handed to it again.
   */
  commit?: 'handled' | 'acknowledged';
  /** Only these types reach the handler; others are acknowledged untouched. */
  types?: readonly MessageType[];
  /** Where a group with no committed offset starts. Default: the beginning (nothing is missed). */
  fromBeginning?: boolean;
  retry?: Partial<RetryPolicy>;
  /**
   * Only the partitions this accepts, of every topic, are consumed by the group (and count in its lag);
   * the others are left to other groups — a static shard of the topics (`libs/service-kit/src/shard.ts`).
   * Default: every partition.
   */
  partitions?: (partition: number) => boolean;
}

export interface Subscription {
  readonly groupId: string;
  close(): Promise<void>;
  /**
   * With `commit: 'acknowledged'`: commit these positions for the group (each partition resumes at its
   * `nextOffset` after a restart or rebalance). Best effort against a partition this member no longer
   * holds: that is reported by rejecting, and the next acknowledgement covers it.
   */
  acknowledge(positions: readonly PartitionPosition[]): Promise<void>;
}

// The errors a handler throws and the rule for retrying them live in errors.ts; these names stay importable from here.
export { NonRetriableError, isRetriable } from './errors';

export interface BusLogger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export const stderrLogger: BusLogger = {
  info: () => undefined,
  warn: (msg, fields) => process.stderr.write(`[bus] WARN ${msg} ${fields ? JSON.stringify(fields) : ''}\n`),
  error: (msg, fields) => process.stderr.write(`[bus] ERROR ${msg} ${fields ? JSON.stringify(fields) : ''}\n`),
};
