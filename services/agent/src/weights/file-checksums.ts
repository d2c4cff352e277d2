import { Worker } from 'node:worker_threads';

/**
 * The `sha256:` checksums (bucket-checksum.ts) of buckets that lie back to back in a file (a version a
 * rank wrote to /dev/shm), computed on a worker thread. Hashing a large version on the agent's own thread
 * stopped it for as long: no GPU samples, no probe answers, no heartbeats — long enough, for a version of
 * gigabytes, to have its trainer confirmed faulty. The worker reads the file (in the page cache: the rank
 * just wrote it) in pieces and answers once; the agent's loop goes on meanwhile.
 */
export function fileChecksums(path: string, buckets: ReadonlyArray<{ offset: number; sizeBytes: number }>): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { path, buckets: buckets.map((b) => [b.offset, b.sizeBytes]) } });
    let settled = false;
    worker.once('message', (answer: { checksums?: string[]; error?: string }) => {
      settled = true;
      if (answer.checksums) resolve(answer.checksums);
      else reject(new Error(`checksumming ${path}: ${answer.error ?? 'no answer'}`));
    });
    worker.once('error', (err) => {
      settled = true;
      reject(err);
    });
    worker.once('exit', (code) => {
      if (!settled) reject(new Error(`the checksum worker for ${path} exited (${code}) without an answer`));
    });
  });
}

/** Plain JavaScript: the worker runs it as it is (no build step, no module resolution). */
const WORKER_SOURCE = `
const { workerData, parentPort } = require('node:worker_threads');
const { openSync, readSync, closeSync } = require('node:fs');
const { createHash } = require('node:crypto');
const PIECE = 16 << 20;
let fd;
try {
  fd = openSync(workerData.path, 'r');
  const buffer = Buffer.allocUnsafe(PIECE);
  const checksums = workerData.buckets.map(([offset, size]) => {
    const hash = createHash('sha256');
    for (let done = 0; done < size; ) {
      const n = readSync(fd, buffer, 0, Math.min(PIECE, size - done), offset + done);
      if (n === 0) throw new Error('the file ends at ' + (offset + done) + ', inside a bucket of ' + size + ' bytes at ' + offset);
      hash.update(buffer.subarray(0, n));
      done += n;
    }
    return 'sha256:' + hash.digest('hex');
  });
  parentPort.postMessage({ checksums });
} catch (err) {
  parentPort.postMessage({ error: String(err && err.message || err) });
} finally {
  if (fd !== undefined) closeSync(fd);
}
`;
