import { bufferReader, checksumLike, fullChecksum, sampledChecksum } from './bucket-checksum';

const MiB = 1 << 20;
const bytesOf = (n: number, seed = 1) => {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = ((i + seed) * 2654435761) >>> 24;
  return b;
};

describe('bucket checksums', () => {
  it('sha256: every byte counts', () => {
    const b = bytesOf(3 * MiB + 5);
    const sum = fullChecksum(bufferReader(b), b.length);
    expect(sum).toMatch(/^sha256:[0-9a-f]{64}$/);
    b[2 * MiB + 3] ^= 1;
    expect(fullChecksum(bufferReader(b), b.length)).not.toBe(sum);
  });

  it('sampled: a stride left unwritten, or written from another offset, changes it, whichever stride it is', () => {
    const b = bytesOf(4 * 4 * MiB + 123);
    const sum = sampledChecksum(bufferReader(b), b.length);
    expect(sum).toMatch(/^sampled-sha256:4194304:4096:[0-9a-f]{64}$/);
    for (let stride = 0; stride < 5; stride++) {
      const start = stride * 4 * MiB;
      const lost = Buffer.from(b);
      lost.fill(0, start, Math.min(start + 4 * MiB, lost.length));
      expect(sampledChecksum(bufferReader(lost), lost.length)).not.toBe(sum);
      if (start + 4096 >= b.length) continue; // the last span (123 bytes) is shorter than a shift
      const shifted = Buffer.from(b);
      b.copy(shifted, start, start + 4096, Math.min(start + 4 * MiB + 4096, b.length));
      expect(sampledChecksum(bufferReader(shifted), shifted.length)).not.toBe(sum);
    }
  });

  it('sampled: the size counts, and a bucket shorter than a sample is read whole', () => {
    const small = bytesOf(1000);
    const sum = sampledChecksum(bufferReader(small), small.length);
    const flipped = Buffer.from(small);
    flipped[500] ^= 0xff;
    expect(sampledChecksum(bufferReader(flipped), flipped.length)).not.toBe(sum);
    const padded = Buffer.concat([small, Buffer.alloc(1)]);
    expect(sampledChecksum(bufferReader(padded), padded.length)).not.toBe(sampledChecksum(bufferReader(small), small.length));
    expect(sampledChecksum(bufferReader(Buffer.alloc(0)), 0)).toMatch(/^sampled-sha256:/);
  });

  it('is not a full checksum: a byte no sample reads is not seen (the guarantee stated in bucket-checksum.ts)', () => {
    const b = bytesOf(8 * MiB);
    const sum = sampledChecksum(bufferReader(b), b.length);
    // Find an unsampled byte by flipping bytes one 64 KiB step at a time until one leaves the checksum alone.
    let unseen = -1;
    for (let i = 0; i < b.length && unseen < 0; i += 64 * 1024) {
      const c = Buffer.from(b);
      c[i] ^= 1;
      if (sampledChecksum(bufferReader(c), c.length) === sum) unseen = i;
    }
    expect(unseen).toBeGreaterThanOrEqual(0);
  });

  it('verifies in the scheme the manifest names, and refuses one it does not know', () => {
    const b = bytesOf(5 * MiB);
    const sampled = sampledChecksum(bufferReader(b), b.length, MiB, 512);
    expect(checksumLike(sampled, bufferReader(b), b.length)).toEqual({ value: sampled });
    const full = fullChecksum(bufferReader(b), b.length);
    expect(checksumLike(full, bufferReader(b), b.length)).toEqual({ value: full });
    expect(checksumLike('xxh3:abcd', bufferReader(b), b.length)).toEqual({ unknown: expect.stringContaining('not one this agent verifies') });
    expect(checksumLike('sampled-sha256:0:512:' + 'a'.repeat(64), bufferReader(b), b.length)).toHaveProperty('unknown');
  });
});
