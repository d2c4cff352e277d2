import { createHash } from 'node:crypto';
import type { MemoryRegion } from '@robustrl/ucx';

/**
 * A bucket's checksum in a version's manifest, in one of two schemes, named by its prefix:
 *
 *  - `sha256:<hex>` — every byte. For versions published from `/dev/shm`, where reading the bucket costs
 *    a pass over host memory.
 *  - `sampled-sha256:<stride>:<sample>:<hex>` — for versions in device memory (CUDA IPC buckets), where
 *    reading every byte would mean copying the bucket to the host, the cost the device-to-device path
 *    exists to avoid. The digest covers the bucket's size and, for every `stride` bytes of the bucket,
 *    `sample` bytes at an offset inside that stride derived from the stride's index (so not at a fixed
 *    place a partial write could match), plus the bucket's last `sample` bytes.
 *
 * The sampled scheme's guarantee: a pull that left any `stride`-sized span of the bucket unwritten,
 * written from another offset, or from another version (old weights in a reused buffer) is caught
 * unless the wrong bytes happen to equal the right ones at that span's sample; a puller's GETs are
 * never shorter than the stride (bucket-puller.ts), so every lost or misplaced GET is covered.
 * Corruption confined to bytes no sample reads (a bit flip) is not: that is what the link's own
 * integrity checks (PCIe/NVLink CRC, ECC) are for. The stride (sampledStrideFor) is 4 MiB, or a
 * sixteenth of a larger bucket rounded up to a power of two: at most about 16 samples of 4 KiB per
 * bucket, read in one call to the addon — verifying a 256 MiB bucket costs 16 small device-to-host
 * copies, against 0.3 ms to move it at 900 GB/s.
 */
export const SAMPLED_STRIDE_BYTES = 4 << 20;
export const SAMPLE_BYTES = 4096;
const SAMPLES_PER_BUCKET = 16;

/** The stride for a bucket of `sizeBytes`: 4 MiB, or a power of two ≥ sizeBytes / 16. */
export function sampledStrideFor(sizeBytes: number): number {
  let stride = SAMPLED_STRIDE_BYTES;
  while (stride * SAMPLES_PER_BUCKET < sizeBytes) stride *= 2;
  return stride;
}

/** The stride a sampled checksum was made with (what a puller's GETs must not be shorter than), or null for another scheme. */
export function strideOf(checksum: string): number | null {
  const m = /^sampled-sha256:(\d+):/.exec(checksum);
  return m ? Number(m[1]) : null;
}

/** Reads bytes of where a bucket lies (a host Buffer, or a region in any memory). */
export interface BucketReader {
  /** `length` bytes at `offset`. */
  read(offset: number, length: number): Uint8Array;
  /** `length` bytes at each of `offsets`, back to back. */
  gather(offsets: readonly number[], length: number): Uint8Array;
}

export function regionReader(region: MemoryRegion, base: number): BucketReader {
  // Host memory with a view (a /dev/shm mapping) is read where it lies; anything else through a copy.
  const view = region.memoryType === 'host' && region.buffer.byteLength > 0 ? region.buffer : null;
  if (view)
    return bufferReader(ArrayBuffer.isView(view) ? new Uint8Array(view.buffer, view.byteOffset + base, view.byteLength - base) : new Uint8Array(view, base));
  return {
    read: (offset, length) => region.read(base + offset, length),
    gather: (offsets, length) =>
      region.readSamples(
        offsets.map((o) => base + o),
        length,
      ),
  };
}
export function bufferReader(bytes: Uint8Array): BucketReader {
  return {
    read: (offset, length) => bytes.subarray(offset, offset + length),
    gather: (offsets, length) => Buffer.concat(offsets.map((o) => bytes.subarray(o, o + length))),
  };
}

export function fullChecksum(read: BucketReader, sizeBytes: number): string {
  const hash = createHash('sha256');
  // Device memory is read in bounded pieces; a host Buffer is handed over whole (subarray, no copy).
  const piece = 64 << 20;
  for (let done = 0; done < sizeBytes; done += piece) hash.update(read.read(done, Math.min(piece, sizeBytes - done)));
  return `sha256:${hash.digest('hex')}`;
}

export function sampledChecksum(read: BucketReader, sizeBytes: number, stride = sampledStrideFor(sizeBytes), sample = SAMPLE_BYTES): string {
  const hash = createHash('sha256');
  const size = Buffer.alloc(8);
  size.writeBigUInt64LE(BigInt(sizeBytes));
  hash.update(size);
  // A sample from every stride, gathered in one read; a last span shorter than a sample is read whole.
  const full: number[] = [];
  let start = 0;
  for (let k = 0; start < sizeBytes && sizeBytes - start >= sample; start += stride, k++) {
    const span = Math.min(stride, sizeBytes - start);
    full.push(start + sampleOffset(k, span - sample));
  }
  if (full.length > 0) hash.update(read.gather(full, sample));
  if (start < sizeBytes) hash.update(read.read(start, sizeBytes - start));
  const tail = Math.min(sample, sizeBytes);
  if (tail > 0) hash.update(read.read(sizeBytes - tail, tail));
  return `sampled-sha256:${stride}:${sample}:${hash.digest('hex')}`;
}

/** A position in [0, room] from the stride's index (a 32-bit mix: fixed, so publisher and puller agree). */
function sampleOffset(k: number, room: number): number {
  if (room <= 0) return 0;
  let x = (k + 1) * 0x9e3779b1;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  x = (x ^ (x >>> 16)) >>> 0;
  return x % (room + 1);
}

/**
 * Recomputes a bucket's checksum in the scheme the manifest used, on the bytes where it now lies: the
 * value to compare, or null with why when the scheme is not one this agent knows.
 */
export function checksumLike(expected: string, read: BucketReader, sizeBytes: number): { value: string } | { unknown: string } {
  if (expected.startsWith('sha256:')) return { value: fullChecksum(read, sizeBytes) };
  const sampled = /^sampled-sha256:(\d+):(\d+):[0-9a-f]{64}$/.exec(expected);
  if (sampled) {
    const stride = Number(sampled[1]);
    const sample = Number(sampled[2]);
    if (stride > 0 && sample > 0 && sample <= stride) return { value: sampledChecksum(read, sizeBytes, stride, sample) };
  }
  return { unknown: `checksum scheme of '${expected.slice(0, 40)}' is not one this agent verifies (sha256:, sampled-sha256:)` };
}
