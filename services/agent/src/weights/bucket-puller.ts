import { MemoryRegion } from '@robustrl/ucx';
import { BucketSpan, bucketChecksum } from './bucket-layout';
import { SourceLinks } from './source-links';

export interface PullLimits {
  /** Bytes per GET; pacing and progress work at this granularity. */
  chunkBytes: number;
  /** 0: unlimited. Otherwise the puller paces its GETs to stay below it (leave bandwidth to training traffic). */
  maxBytesPerSecond: number;
  /** A GET (one chunk) not done by then fails the pull: the bound on a source that dies silently. */
  opTimeoutMs: number;
  /** How long to wait for a relay's catalog to list the version. */
  catalogWaitMs: number;
}

export interface BucketPull {
  version: number;
  bucket: BucketSpan;
  checksum: string;
  sourceAddress: string;
  /** The assignment, which the source's catalog is granted for (weight-server.ts), and its grant's token with identity on. */
  pullId: string;
  pullerId: string;
  token?: string;
}

export type PullOutcome = { ok: true; bytes: number; durationMs: number } | { ok: false; reason: string };

/**
 * Fetches one bucket (paper §5.2.1 ➁) by one-sided GETs into the staging region at the bucket's offset,
 * then verifies it against the manifest's checksum. Never throws: a failure is an outcome whose reason
 * the registry reads (a checksum reason → pull again; anything else blames the source → go elsewhere).
 */
export async function pullBucket(
  links: SourceLinks,
  staging: MemoryRegion,
  pull: BucketPull,
  limits: PullLimits,
  stopping: () => boolean,
): Promise<PullOutcome> {
  const started = Date.now();
  const { offset, sizeBytes } = pull.bucket;
  try {
    const { ep, remote } = await links.regionOf(pull.sourceAddress, pull.version, limits.catalogWaitMs, {
      pullId: pull.pullId,
      pullerId: pull.pullerId,
      token: pull.token,
    });
    if (offset + sizeBytes > remote.length)
      return { ok: false, reason: `source region of ${remote.length} bytes does not hold bucket ${pull.bucket.index} (${offset}+${sizeBytes})` };
    for (let done = 0; done < sizeBytes;) {
      if (stopping()) return { ok: false, reason: 'puller stopping' };
      const n = Math.min(limits.chunkBytes, sizeBytes - done);
      await ep.get(staging, offset + done, remote, offset + done, n, { timeoutMs: limits.opTimeoutMs });
      done += n;
      if (limits.maxBytesPerSecond > 0) {
        const due = started + (done / limits.maxBytesPerSecond) * 1000;
        const wait = due - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    }
  } catch (err) {
    links.forget(pull.sourceAddress);
    const e = err as Error & { code?: string };
    return { ok: false, reason: `source ${pull.sourceAddress} unreachable: ${e.name}${e.code ? ` ${e.code}` : ''}: ${e.message}` };
  }
  const bytes = Buffer.from((staging.buffer as Buffer).buffer, (staging.buffer as Buffer).byteOffset + offset, sizeBytes);
  const got = bucketChecksum(bytes);
  if (got !== pull.checksum) return { ok: false, reason: `checksum mismatch on bucket ${pull.bucket.index}: expected ${pull.checksum}, got ${got}` };
  return { ok: true, bytes: sizeBytes, durationMs: Date.now() - started };
}
