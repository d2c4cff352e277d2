/** (c) of the single-link benchmark (weights-link.ts): `Buffer#copy` of a SIZE buffer into another, the in-process ceiling. */
import { performance } from 'node:perf_hooks';
import { Round, roundOf } from './weights-link-rounds';

/** Two SIZE buffers, every page touched. */
export function memcpyBuffers(sizeBytes: number): { src: Buffer; dst: Buffer } {
  const src = Buffer.allocUnsafeSlow(sizeBytes);
  for (let off = 0; off < sizeBytes; off += 4096) src[off] = (off >>> 12) & 0xff;
  return { src, dst: Buffer.allocUnsafeSlow(sizeBytes).fill(1) };
}

export function memcpyRound(bufs: { src: Buffer; dst: Buffer }, warmup: number, iterations: number): Round {
  const { src, dst } = bufs;
  for (let i = 0; i < warmup; i++) src.copy(dst);
  const times: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const t0 = performance.now();
    src.copy(dst);
    times.push(performance.now() - t0);
  }
  if (!dst.equals(src)) throw new Error('destination differs from source after the copies');
  return roundOf(src.length, times);
}
