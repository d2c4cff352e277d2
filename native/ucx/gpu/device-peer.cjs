// The other process of the module's GPU tests (gpu/cuda.test.mjs): a UCX worker with a CUDA context,
// `bytes` of device memory filled from a seed and registered, a listener. Prints one JSON line
// {port, address, length, rkey (base64)}, then answers stdin lines: "digest" -> {sha256} of its device
// memory (copied to the host). Run: node device-peer.cjs <bytes> <seed>
'use strict';
const { createHash } = require('node:crypto');
const ucx = require('../dist/ucx.js');

const bytes = Number(process.argv[2]);
const seed = Number(process.argv[3] ?? 1);
const worker = new ucx.UcxWorker({ cudaDevice: 0 });
const address = ucx.cuda.alloc(0, bytes);
const host = Buffer.alloc(bytes);
let x = (seed * 2654435761) >>> 0 || 1;
for (let i = 0; i + 4 <= bytes; i += 4) {
  x ^= x << 13;
  x >>>= 0;
  x ^= x >>> 17;
  x ^= x << 5;
  x >>>= 0;
  host.writeUInt32LE(x, i);
}
ucx.cuda.copyFromHost(address, host);
const region = worker.mapDevice(address, bytes, 'cuda');
const listener = worker.listen({ host: '127.0.0.1', port: 0 }, () => {});
const d = region.descriptor();
process.stdout.write(JSON.stringify({ port: listener.port, address: `0x${d.address.toString(16)}`, length: d.length, rkey: d.rkey.toString('base64') }) + '\n');
require('node:readline')
  .createInterface({ input: process.stdin })
  .on('line', (line) => {
    if (line.trim() !== 'digest') return;
    const out = Buffer.alloc(bytes);
    ucx.cuda.copyToHost(address, out);
    process.stdout.write(JSON.stringify({ sha256: createHash('sha256').update(out).digest('hex') }) + '\n');
  });
