import { isEmulatedProtocol, MemoryType } from '@robustrl/ucx';
import { checksumLike, regionReader, strideOf } from './bucket-checksum';
import { SourceLinks } from './source-links';
import type { BucketPlace } from './weight-server';
import { RobustrlError } from '@robustrl/bus';

export interface PullLimits {
  /** Bytes per GET; pacing and progress work at this granularity. */
  chunkBytes: number;
  /**
   * GETs of one bucket in flight at once (1: one after the other). Each GET pays a fixed cost (about
   * 250 µs for device memory over cuda_ipc, gpu-offline-build.md section 4), so a bucket of many chunks
   * moves at link speed only with several in flight. Absent: 1.
   */
  getsInFlight?: number;
  /** 0: unlimited. Otherwise the puller paces its GETs to stay below it (leave bandwidth to training traffic). */
  maxBytesPerSecond: number;
  /** A GET (one chunk) not done by then fails the pull: the bound on a source that dies silently. */
  opTimeoutMs: number;
  /** How long to wait for a relay's catalog to list the version. */
  catalogWaitMs: number;
}

export interface BucketPull {
  version: number;
  /** Which publication's buckets `bucketIndex` counts in (0 for a version of one shard). */
  shard: number;
  bucketIndex: number;
  checksum: string;
  sourceAddress: string;
  /** The assignment, which the source's catalog is granted for (weight-server.ts), and its grant's token with identity on. */
  pullId: string;
  pullerId: string;
  token?: string;
}

/**
 * How a bucket travelled: the memories at both ends and the protocol UCX chose for its first GET
 * (Endpoint.getDescribed; UCX 1.13's default protocols describe nothing). `emulated`: device memory at
 * an end, copied through a software bounce buffer — about 1000x slower than cuda_ipc's zero-copy
 * (gpu-offline-build.md, section 3). Host memory over tcp is always emulated, and that is normal.
 */
export interface PullTransfer {
  localMemory: MemoryType;
  sourceMemory: MemoryType;
  protocol: string | null;
  emulated: boolean;
  /** Time spent moving the bytes (all GETs), and verifying them against the manifest's checksum. */
  getMicros: number;
  verifyMicros: number;
}
export type PullOutcome = { ok: true; bytes: number; durationMs: number; transfer: PullTransfer } | { ok: false; reason: string };

/**
 * Fetches one bucket (paper §5.2.1 ➁) by one-sided GETs into where it goes here (a staging region at the
 * bucket's offset, or a device buffer the framework gave), then verifies it against the manifest's
 * checksum. Never throws: a failure is an outcome whose reason the registry reads (a checksum reason →
 * pull again; anything else blames the source → go elsewhere).
 */
export async function pullBucket(links: SourceLinks, into: BucketPlace, pull: BucketPull, limits: PullLimits, stopping: () => boolean): Promise<PullOutcome> {
  const started = Date.now();
  const { offset, sizeBytes, region } = into;
  let transfer: PullTransfer;
  try {
    const { ep, remote, memoryType } = await links.regionOf(pull.sourceAddress, pull.version, pull.shard, pull.bucketIndex, limits.catalogWaitMs, {
      pullId: pull.pullId,
      pullerId: pull.pullerId,
      token: pull.token,
    });
    if (sizeBytes !== remote.length)
      return { ok: false, reason: `source holds bucket ${pull.bucketIndex} as ${remote.length} bytes, the manifest says ${sizeBytes}` };
    transfer = { localMemory: region.memoryType, sourceMemory: memoryType, protocol: null, emulated: false, getMicros: 0, verifyMicros: 0 };
    const device = transfer.localMemory !== 'host' || transfer.sourceMemory !== 'host';
    // No GET shorter than the checksum's stride: a lost GET then always spans a sample (bucket-checksum.ts).
    const chunkBytes = Math.max(limits.chunkBytes, strideOf(pull.checksum) ?? 0);
    const getsStarted = process.hrtime.bigint();
    // The first GET says how UCX carries the bucket, so a silent fallback of device memory is reported.
    const first = Math.min(chunkBytes, sizeBytes);
    const described = await ep.getDescribed(region, offset, remote, 0, first, { timeoutMs: limits.opTimeoutMs });
    transfer.protocol = /no debug info/.test(described) ? null : described;
    transfer.emulated = device && transfer.protocol !== null && isEmulatedProtocol(transfer.protocol);
    // The rest with up to getsInFlight GETs outstanding, each started once the pacing allows it.
    let next = first;
    let received = first;
    const lane = async (): Promise<void> => {
      while (next < sizeBytes) {
        if (stopping()) throw new PullStopping();
        const at = next;
        const n = Math.min(chunkBytes, sizeBytes - at);
        next += n;
        if (limits.maxBytesPerSecond > 0) {
          const wait = started + ((at + n) / limits.maxBytesPerSecond) * 1000 - Date.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
        await ep.get(region, offset + at, remote, at, n, { timeoutMs: limits.opTimeoutMs });
        received += n;
      }
    };
    const lanes = Math.max(1, Math.min(limits.getsInFlight ?? 1, Math.ceil((sizeBytes - first) / chunkBytes)));
    await Promise.all(Array.from({ length: lanes }, lane));
    transfer.getMicros = Math.round(Number(process.hrtime.bigint() - getsStarted) / 1000);
    if (received !== sizeBytes) return { ok: false, reason: `bucket ${pull.bucketIndex}: ${received} of ${sizeBytes} bytes arrived` };
  } catch (err) {
    if (err instanceof PullStopping) return { ok: false, reason: 'puller stopping' };
    links.forget(pull.sourceAddress);
    const e = err as Error & { code?: string };
    return { ok: false, reason: `source ${pull.sourceAddress} unreachable: ${e.name}${e.code ? ` ${e.code}` : ''}: ${e.message}` };
  }
  let got: ReturnType<typeof checksumLike>;
  const verifyStarted = process.hrtime.bigint();
  try {
    got = checksumLike(pull.checksum, regionReader(region, offset), sizeBytes);
    transfer.verifyMicros = Math.round(Number(process.hrtime.bigint() - verifyStarted) / 1000);
  } catch (err) {
    return { ok: false, reason: `bucket ${pull.bucketIndex} could not be read back to verify it: ${err instanceof Error ? err.message : String(err)}` };
  }
  if ('unknown' in got) return { ok: false, reason: `bucket ${pull.bucketIndex} cannot be verified: ${got.unknown}` };
  if (got.value !== pull.checksum) return { ok: false, reason: `checksum mismatch on bucket ${pull.bucketIndex}: expected ${pull.checksum}, got ${got.value}` };
  return { ok: true, bytes: sizeBytes, durationMs: Date.now() - started, transfer };
}

/** The puller is stopping: the pull ends unfinished (no message, as ever). */
class PullStopping extends RobustrlError {
  constructor() {
    super('');
  }
}
