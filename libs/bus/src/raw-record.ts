/** A record as the bus writes it, below the contracts: what both adapters count and bound. */

import { RobustrlError } from './errors';

/**
 * Kafka's default limit (`message.max.bytes`, 1 MiB) less room for the record batch's own framing:
 * what both adapters accept unless told otherwise.
 */
export const DEFAULT_MAX_RECORD_BYTES = 1_000_000;

/** What a record costs against `maxRecordBytes`: its value, key and headers. */
export function recordBytes(r: { key: string | null; value: Buffer | string | null; headers?: Record<string, string> }): number {
  let n = (r.value === null ? 0 : Buffer.byteLength(r.value)) + (r.key === null ? 0 : Buffer.byteLength(r.key));
  for (const [k, v] of Object.entries(r.headers ?? {})) n += Buffer.byteLength(k) + Buffer.byteLength(v);
  return n;
}

/** A record larger than the bus accepts: not retriable as it is (the dead-letter path sends a reference instead). */
export class RecordTooLargeError extends RobustrlError {
  constructor(topic: string, bytes: number, max: number) {
    super(`record of ${bytes} bytes for ${topic} exceeds the bus's limit of ${max} bytes`, { retriable: false });
  }
}

export interface RawRecord {
  topic: string;
  key: string | null;
  value: Buffer | string | null;
  headers?: Record<string, string>;
}
