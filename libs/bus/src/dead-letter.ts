import { DEAD_LETTER_TOPIC } from '@robustrl/contracts';
import type { DeadLetterKind } from './dead-letter-counts';
import { RawRecord, recordBytes } from './raw-record';

export type { DeadLetterKind } from './dead-letter-counts';

/** Header names of a dead-letter record. The value is the original record's bytes, untouched. */
export const DeadLetterHeaders = {
  reason: 'x-dead-letter-reason',
  kind: 'x-dead-letter-kind',
  originalTopic: 'x-original-topic',
  originalPartition: 'x-original-partition',
  originalOffset: 'x-original-offset',
  consumerGroup: 'x-consumer-group',
  deadLetteredAt: 'x-dead-lettered-at',
  /** `true` on a reference: the value is a JSON description of the original, not its bytes. */
  reference: 'x-dead-letter-reference',
  originalSize: 'x-original-size',
} as const;

/** What a reference dead letter holds instead of the original bytes (too large to copy). */
export interface DeadLetterReference {
  topic: string;
  partition: number;
  offset: string;
  sizeBytes: number;
  reason: string;
  /** The original's first bytes, decoded as UTF-8 (lossy), for a first look without fetching it. */
  prefix: string;
}

/** How much of an oversized original a reference keeps, and the room left for the dead letter's own headers. */
const REFERENCE_PREFIX_BYTES = 2_048;
const HEADER_ROOM_BYTES = 16_384;

export interface DeadLetter {
  kind: DeadLetterKind;
  reason: string;
  originalTopic: string;
  originalPartition: number;
  originalOffset: string;
  consumerGroup: string;
  deadLetteredAt: string;
  key: string | null;
  /** The original bytes, or for a reference the JSON of a DeadLetterReference. */
  value: Buffer | null;
  /** True when the original was too large to copy: `value` describes where it is. */
  reference: boolean;
  originalSizeBytes: number;
}

/**
 * The dead letter of a record: its bytes and headers untouched plus the `x-dead-letter-*` headers — or,
 * when that copy would not fit the bus (`maxRecordBytes`), a small reference (topic, partition, offset,
 * size, reason, a bounded prefix) so the partition can move on: a dead letter must never be the record
 * that cannot be written.
 */
export function toDeadLetterRecord(
  original: { topic: string; partition: number; offset: string; key: string | null; value: Buffer | null; headers: Record<string, string> },
  failure: { kind: DeadLetterKind; reason: string; groupId: string; at: Date },
  maxRecordBytes: number,
  forceReference = false,
): RawRecord {
  const reason = failure.reason.slice(0, 8_000);
  const sizeBytes = original.value?.length ?? 0;
  const deadLetterHeaders = {
    [DeadLetterHeaders.reason]: reason,
    [DeadLetterHeaders.kind]: failure.kind,
    [DeadLetterHeaders.originalTopic]: original.topic,
    [DeadLetterHeaders.originalPartition]: String(original.partition),
    [DeadLetterHeaders.originalOffset]: original.offset,
    [DeadLetterHeaders.consumerGroup]: failure.groupId,
    [DeadLetterHeaders.deadLetteredAt]: failure.at.toISOString(),
    [DeadLetterHeaders.originalSize]: String(sizeBytes),
  };
  const copy: RawRecord = { topic: DEAD_LETTER_TOPIC, key: original.key, value: original.value, headers: { ...original.headers, ...deadLetterHeaders } };
  if (!forceReference && recordBytes(copy) <= maxRecordBytes - HEADER_ROOM_BYTES) return copy;
  const reference: DeadLetterReference = {
    topic: original.topic,
    partition: original.partition,
    offset: original.offset,
    sizeBytes,
    reason,
    prefix: original.value ? original.value.subarray(0, REFERENCE_PREFIX_BYTES).toString('utf8') : '',
  };
  return {
    topic: DEAD_LETTER_TOPIC,
    key: original.key === null ? null : original.key.slice(0, 1_000),
    value: JSON.stringify(reference),
    headers: { ...deadLetterHeaders, [DeadLetterHeaders.reference]: 'true' },
  };
}

export function fromDeadLetterRecord(record: { key: string | null; value: Buffer | null; headers: Record<string, string> }): DeadLetter {
  const h = record.headers;
  return {
    kind: h[DeadLetterHeaders.kind] as DeadLetterKind,
    reason: h[DeadLetterHeaders.reason] ?? '',
    originalTopic: h[DeadLetterHeaders.originalTopic] ?? '',
    originalPartition: Number(h[DeadLetterHeaders.originalPartition] ?? -1),
    originalOffset: h[DeadLetterHeaders.originalOffset] ?? '',
    consumerGroup: h[DeadLetterHeaders.consumerGroup] ?? '',
    deadLetteredAt: h[DeadLetterHeaders.deadLetteredAt] ?? '',
    key: record.key,
    value: record.value,
    reference: h[DeadLetterHeaders.reference] === 'true',
    originalSizeBytes: Number(h[DeadLetterHeaders.originalSize] ?? record.value?.length ?? 0),
  };
}
