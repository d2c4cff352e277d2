import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bufferReader, fullChecksum } from './bucket-checksum';
import { fileChecksums } from './file-checksums';

describe('checksums of a version in a file, on a worker thread', () => {
  const dir = mkdtempSync(join(tmpdir(), 'file-checksums-'));

  it("equals the bucket checksum of each bucket's bytes, and the agent's loop runs meanwhile", async () => {
    const sizes = [5 << 20, 1, 17 << 20];
    const bytes = randomBytes(sizes.reduce((a, b) => a + b, 0));
    const path = join(dir, 'v1');
    writeFileSync(path, bytes);
    let offset = 0;
    const buckets = sizes.map((sizeBytes) => ({ offset: (offset += sizeBytes) - sizeBytes, sizeBytes }));
    let looped = false;
    setImmediate(() => (looped = true));
    const checksums = await fileChecksums(path, buckets);
    // A checksum computed on this thread would have resolved before the loop came round to setImmediate.
    expect(looped).toBe(true);
    expect(checksums).toEqual(buckets.map((b) => fullChecksum(bufferReader(bytes.subarray(b.offset, b.offset + b.sizeBytes)), b.sizeBytes)));
  });

  it('refuses a file that ends inside a bucket, or is not there, naming it', async () => {
    const path = join(dir, 'short');
    writeFileSync(path, randomBytes(1000));
    await expect(fileChecksums(path, [{ offset: 0, sizeBytes: 4000 }])).rejects.toThrow(/short: .*the file ends at 1000, inside a bucket of 4000 bytes at 0/);
    await expect(fileChecksums(join(dir, 'absent'), [{ offset: 0, sizeBytes: 1 }])).rejects.toThrow(/absent: .*ENOENT/);
  });
});
