import { DEAD_LETTER_TOPIC } from '@robustrl/contracts';
import { RawRecord } from './message-bus';

export type DeadLetterKind = 'invalid' | 'handler-failed';

/** Header names of a dead-letter record. The value is the original record's bytes, untouched. */
export const DeadLetterHeaders = {
  reason: 'x-dead-letter-reason',
  kind: 'x-dead-letter-kind',
  originalTopic: 'x-original-topic',
  originalPartition: 'x-original-partition',
  originalOffset: 'x-original-offset',
  consumerGroup: 'x-consumer-group',
  deadLetteredAt: 'x-dead-lettered-at',
} as const;

export interface DeadLetter {
  kind: DeadLetterKind;
  reason: string;
  originalTopic: string;
  originalPartition: number;
  originalOffset: string;
  consumerGroup: string;
  deadLetteredAt: string;
  key: string | null;
  value: Buffer | null;
}

export function toDeadLetterRecord(
  original: { topic: string; partition: number; offset: string; key: string | null; value: Buffer | null; headers: Record<string, string> },
  failure: { kind: DeadLetterKind; reason: string; groupId: string; at: Date },
): RawRecord {
  return {
    topic: DEAD_LETTER_TOPIC,
    key: original.key,
    value: original.value,
    headers: {
      ...original.headers,
      [DeadLetterHeaders.reason]: failure.reason.slice(0, 8_000),
      [DeadLetterHeaders.kind]: failure.kind,
      [DeadLetterHeaders.originalTopic]: original.topic,
      [DeadLetterHeaders.originalPartition]: String(original.partition),
      [DeadLetterHeaders.originalOffset]: original.offset,
      [DeadLetterHeaders.consumerGroup]: failure.groupId,
      [DeadLetterHeaders.deadLetteredAt]: failure.at.toISOString(),
    },
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
  };
}
