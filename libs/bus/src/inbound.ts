import { setTimeout as sleep } from 'node:timers/promises';
import { DEAD_LETTER_TOPIC, decodeMessage, MessageType, topicOf } from '@robustrl/contracts';
import { extractTraceContext, inSpan, SpanKind } from '@robustrl/telemetry';
import { DeadLetterKind, toDeadLetterRecord } from './dead-letter';
import type { RecordVerifier } from './identity/record-identity';
import { failureClass, RobustrlError } from './errors';
import { BatchHandler, BusLogger, DeadLetterLedger, DEFAULT_RETRY, Delivery, MessageHandler, RawRecord, RecordTooLargeError, RetryPolicy } from './message-bus';

export interface InboundRecord {
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  value: Buffer | null;
  headers: Record<string, string>;
}

export interface InboundPipeline {
  groupId: string;
  handler: MessageHandler;
  types?: ReadonlySet<MessageType>;
  retry: RetryPolicy;
  deadLetter(record: RawRecord): Promise<void>;
  /** Told of every dead letter written (not of one skipped because another group wrote it): the adapters count them. */
  onDeadLettered?: (topic: string, kind: DeadLetterKind) => void;
  /** The bus's record limit: a dead letter that would exceed it is written as a reference. */
  maxRecordBytes: number;
  /** One dead letter per record across groups and restarts (see DeadLetterLedger); absent: one per group. */
  ledger?: { ledger: DeadLetterLedger; stream: string };
  logger: BusLogger;
  /** Lets the Kafka adapter keep the group session alive while a handler is being retried. */
  heartbeat?: () => Promise<void>;
  /** Stop retrying when the subscription is closing; the record is then left uncommitted. */
  isRunning?: () => boolean;
  /** Records it refuses are dead-lettered as `unauthenticated`, never handled (BusIdentity). */
  verifier?: RecordVerifier;
}

export type InboundOutcome = 'handled' | 'skipped' | 'dead-lettered' | 'abandoned';

/** Retriable: the record stays uncommitted and the group's next member handles it again. */
export class SubscriptionClosingError extends RobustrlError {
  constructor() {
    super('subscription closing while a record was being retried; it stays uncommitted and will be redelivered', { retriable: true });
  }
}

/**
 * The consume pipeline shared by both adapters: decode → validate → handle (with retries, inside a
 * `process <type>` consumer span continuing the producer's trace) → or dead-letter.
 * Resolves when the record may be committed. Rejects only when the record must NOT be committed
 * (the dead-letter write failed, or the subscription is closing mid-retry).
 */
export async function processInbound(record: InboundRecord, p: InboundPipeline): Promise<InboundOutcome> {
  const decoded = await decodeInbound(record, p);
  if (decoded === 'dead-lettered' || decoded === 'skipped') return decoded;
  const message = decoded.message;
  const parent = extractTraceContext(record.headers.traceparent ? record.headers : ((message.trace as Record<string, string> | undefined) ?? {}));
  let attempt = 0;
  /** Attempts that failed for the record's own sake (infrastructure failures do not count). */
  let attemptsOnRecord = 0;
  for (;;) {
    attempt += 1;
    attemptsOnRecord += 1;
    try {
      await inSpan(
        `process ${message.type}`,
        {
          kind: SpanKind.CONSUMER,
          parent,
          attributes: {
            'messaging.system': 'kafka',
            'messaging.destination.name': record.topic,
            'messaging.consumer.group.name': p.groupId,
            'messaging.kafka.offset': Number(record.offset),
            'robustrl.job_id': message.jobId,
            'robustrl.attempt': attempt,
          },
        },
        () => p.handler(attempt === 1 ? decoded : { ...decoded, attempt }),
      );
      return 'handled';
    } catch (err) {
      const reason = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      // A dependency that is down is not the record's fault: wait for it, however long, and do not
      // spend the record's retry budget (errors.ts, docs/contributors/delivery-guarantees.md).
      const failure = failureClass(err);
      const infrastructure = failure === 'unavailable';
      if (infrastructure) attemptsOnRecord -= 1;
      if (!infrastructure && (failure === 'final' || attemptsOnRecord >= p.retry.maxAttempts)) {
        await deadLetter(record, p, 'handler-failed', `handler failed after ${attempt} attempt(s): ${reason}`);
        return 'dead-lettered';
      }
      p.logger.warn(infrastructure ? 'a dependency is unavailable, the record waits' : 'handler failed, retrying', {
        group: p.groupId,
        topic: record.topic,
        offset: record.offset,
        attempt,
        reason,
      });
      const backoff = Math.min(p.retry.maxBackoffMs, p.retry.initialBackoffMs * 2 ** Math.min(attempt - 1, 20));
      await sleep(backoff / 2 + Math.random() * (backoff / 2));
      if (p.isRunning && !p.isRunning()) throw new SubscriptionClosingError();
      await p.heartbeat?.();
    }
  }
}

export interface InboundBatchPipeline extends Omit<InboundPipeline, 'handler'> {
  batchHandler: BatchHandler;
}

/**
 * The batch form of `processInbound`, for records of one partition in offset order: each record is
 * decoded and validated (bad ones dead-lettered, filtered types skipped), the valid ones go to the
 * batch handler together, inside one `process batch` consumer span. Retries as `processInbound` does —
 * an unavailable dependency is waited out, other failures spend the batch's budget — and a batch out
 * of attempts is handled again record by record (batches of one), so only a record that fails on its
 * own is dead-lettered. Resolves when the whole range may be committed; rejects as `processInbound`.
 */
export async function processInboundBatch(records: readonly InboundRecord[], p: InboundBatchPipeline): Promise<void> {
  if (records.length === 0) return;
  const deliveries: Delivery[] = [];
  for (const record of records) {
    const decoded = await decodeInbound(record, p);
    if (decoded !== 'dead-lettered' && decoded !== 'skipped') deliveries.push(decoded);
  }
  if (deliveries.length === 0) return;
  const last = records[records.length - 1];
  const nextOffset = String(BigInt(last.offset) + 1n);
  const first = records[0];
  const outcome = await handleBatch(first.topic, first.partition, deliveries, nextOffset, p, p.retry.maxAttempts);
  if (outcome === 'handled') return;
  // Out of attempts as a whole: one at a time, so the good records are handled and only the bad one is dead-lettered.
  p.logger.warn('batch failed on every attempt; handling its records one by one', { group: p.groupId, topic: first.topic, records: deliveries.length });
  for (const d of deliveries) {
    const single = await handleBatch(d.topic, d.partition, [d], String(BigInt(d.offset) + 1n), p, p.retry.maxAttempts);
    if (single !== 'handled') {
      const record = records.find((r) => r.offset === d.offset)!;
      await deadLetter(record, p, 'handler-failed', single.reason);
    }
  }
}

/**
 * Decode and validate one record: its delivery, or what became of it — dead-lettered (not a valid
 * message, or one on another topic than its type's) or skipped (a type not asked for).
 */
async function decodeInbound(record: InboundRecord, p: Omit<InboundPipeline, 'handler'>): Promise<Delivery | 'dead-lettered' | 'skipped'> {
  const decoded = decodeMessage(record.value);
  if (!decoded.ok) {
    await deadLetter(record, p, 'invalid', decoded.reason);
    return 'dead-lettered';
  }
  const message = decoded.message;
  // A type is valid only on its catalog topic: a FaultConfirmed written to the telemetry topic (by a
  // client that may write telemetry, not verdicts) must not be acted on. Dead letters carry other
  // topics' records by design.
  const home = topicOf(message.type);
  if (record.topic !== home && record.topic !== DEAD_LETTER_TOPIC) {
    await deadLetter(record, p, 'invalid', `${message.type} belongs on ${home}, not on ${record.topic}`);
    return 'dead-lettered';
  }
  if (p.types && !p.types.has(message.type)) return 'skipped';
  // Dead letters are evidence for operators, kept with the original's headers: not instructions to verify.
  if (p.verifier && record.topic !== DEAD_LETTER_TOPIC && record.value !== null) {
    const refused = p.verifier.verify({ topic: record.topic, key: record.key, value: record.value, headers: record.headers }, message);
    if (refused !== null) {
      await deadLetter(record, p, 'unauthenticated', refused);
      return 'dead-lettered';
    }
  }
  return {
    message,
    topic: record.topic,
    partition: record.partition,
    offset: record.offset,
    key: record.key,
    headers: record.headers,
    groupId: p.groupId,
    attempt: 1,
  };
}

async function handleBatch(
  topic: string,
  partition: number,
  deliveries: Delivery[],
  nextOffset: string,
  p: InboundBatchPipeline,
  maxAttempts: number,
): Promise<'handled' | { reason: string }> {
  let attempt = 0;
  let attemptsOnBatch = 0;
  for (;;) {
    attempt += 1;
    attemptsOnBatch += 1;
    try {
      const batch = {
        topic,
        partition,
        deliveries: attempt === 1 ? deliveries : deliveries.map((d) => ({ ...d, attempt })),
        nextOffset,
        groupId: p.groupId,
        attempt,
      };
      await inSpan(
        `process batch ${topic}`,
        {
          kind: SpanKind.CONSUMER,
          attributes: {
            'messaging.system': 'kafka',
            'messaging.destination.name': topic,
            'messaging.consumer.group.name': p.groupId,
            'messaging.batch.message_count': deliveries.length,
            'messaging.kafka.offset': Number(deliveries[0].offset),
            'robustrl.attempt': attempt,
          },
        },
        () => p.batchHandler(batch),
      );
      return 'handled';
    } catch (err) {
      const reason = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      const failure = failureClass(err);
      const infrastructure = failure === 'unavailable';
      if (infrastructure) attemptsOnBatch -= 1;
      if (!infrastructure && (failure === 'final' || attemptsOnBatch >= maxAttempts))
        return { reason: `handler failed after ${attempt} attempt(s): ${reason}` };
      p.logger.warn(infrastructure ? 'a dependency is unavailable, the batch waits' : 'batch handler failed, retrying', {
        group: p.groupId,
        topic,
        partition,
        offsets: `${deliveries[0].offset}..${deliveries[deliveries.length - 1].offset}`,
        attempt,
        reason,
      });
      const backoff = Math.min(p.retry.maxBackoffMs, p.retry.initialBackoffMs * 2 ** Math.min(attempt - 1, 20));
      await sleep(backoff / 2 + Math.random() * (backoff / 2));
      if (p.isRunning && !p.isRunning()) throw new SubscriptionClosingError();
      await p.heartbeat?.();
    }
  }
}

/**
 * Writes the record's dead letter, retrying until it is written: a dead letter that cannot be written
 * must neither be skipped (the record would be lost) nor stop the consumer. A write refused as too
 * large is retried as a reference; any other failure (broker down) waits with backoff while the
 * partition holds, and gives up only when the subscription closes (the record then stays uncommitted).
 */
async function deadLetter(record: InboundRecord, p: Omit<InboundPipeline, 'handler'>, kind: DeadLetterKind, reason: string): Promise<void> {
  const failure = { kind, reason, groupId: p.groupId, at: new Date() };
  let asReference = false;
  let claimed = false;
  for (let attempt = 1; ; attempt++) {
    try {
      if (!claimed && p.ledger && !(await p.ledger.ledger.claim({ stream: p.ledger.stream, partition: record.partition, offset: record.offset }, p.groupId))) {
        p.logger.info('record already dead-lettered by another consumer group', { group: p.groupId, topic: record.topic, offset: record.offset });
        return;
      }
      // Logged once it is ours to write: a group that finds it already claimed writes (and warns) nothing.
      if (!claimed)
        p.logger.warn('dead-lettering record', { group: p.groupId, topic: record.topic, partition: record.partition, offset: record.offset, kind, reason });
      claimed = true;
      await p.deadLetter(toDeadLetterRecord(record, failure, p.maxRecordBytes, asReference));
      // Best effort: unmarked, a replay of this record writes its dead letter once more.
      await p.ledger?.ledger.written?.({ stream: p.ledger.stream, partition: record.partition, offset: record.offset }, p.groupId).catch(() => undefined);
      p.onDeadLettered?.(record.topic, kind);
      return;
    } catch (err) {
      if (p.isRunning && !p.isRunning()) throw new SubscriptionClosingError();
      if (!asReference && isTooLarge(err)) {
        asReference = true;
        continue;
      }
      p.logger.error('dead-letter write failed, retrying', { group: p.groupId, topic: record.topic, offset: record.offset, attempt, error: String(err) });
      await sleep(Math.min(5_000, 100 * 2 ** Math.min(attempt, 6)));
      await p.heartbeat?.().catch(() => undefined);
    }
  }
}

/** The bus (or the broker: kafkajs's MESSAGE_TOO_LARGE) refused the record for its size. */
function isTooLarge(err: unknown): boolean {
  if (err instanceof RecordTooLargeError) return true;
  const e = err as { type?: string; message?: string; cause?: unknown } | null;
  return e?.type === 'MESSAGE_TOO_LARGE' || /too large/i.test(e?.message ?? '') || (e?.cause !== undefined && isTooLarge(e.cause));
}

export function retryPolicy(partial?: Partial<RetryPolicy>): RetryPolicy {
  const policy = { ...DEFAULT_RETRY, ...partial };
  if (!Number.isInteger(policy.maxAttempts) || policy.maxAttempts < 1) throw new Error(`retry.maxAttempts must be an integer >= 1, got ${policy.maxAttempts}`);
  return policy;
}
