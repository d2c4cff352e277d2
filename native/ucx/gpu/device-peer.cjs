// The other process of the module's GPU tests (gpu/cuda.test.mjs): a UCX worker with a CUDA context,
// `bytes` of device memory filled from a seed and registered, a listener. Prints one JSON line
// {port, address, length, rkey (base64)}, then answers stdin lines: "digest" -> {sha256} of its device
// memory (copied to the host). Run: node device-peer.cjs <bytes> <seed>
// Or, as a puller: node device-peer.cjs pull <port> <address> <length> <rkey base64> (see below).
'use strict';
const { createHash } = require('node:crypto');
const ucx = require('../dist/ucx.js');

const worker = new ucx.UcxWorker({ cudaDevice: 0 });
// `pull <port> <address> <length> <rkey base64>`: GET that region into device memory of its own, print {sha256, protocol}, exit.
if (process.argv[2] === 'pull') {
  const [port, address, length, rkey] = process.argv.slice(3);
  const n = Number(length);
  void (async () => {
    const ep = await worker.connect('127.0.0.1', Number(port), { timeoutMs: 15_000 });
    const remote = ep.remoteRegion({ address: BigInt(address), length: n, rkey: Buffer.from(rkey, 'base64') });
    const local = ucx.cuda.alloc(0, n);
    const region = worker.mapDevice(local, n, 'cuda');
    const protocol = await ep.getDescribed(region, 0, remote, 0, n, { timeoutMs: 30_000 });
    const out = Buffer.alloc(n);
    ucx.cuda.copyToHost(local, out);
    process.stdout.write(JSON.stringify({ sha256: createHash('sha256').update(out).digest('hex'), protocol }) + '\n');
    await ep.close({ force: true });
    worker.close();
    process.exit(0);
  })().catch((err) => {
    process.stdout.write(JSON.stringify({ error: `${err.name} ${err.code ?? ''}: ${err.message}` }) + '\n');
    process.exit(1);
  });
  return;
}
const bytes = Number(process.argv[2]);
const seed = Number(process.argv[3] ?? 1);
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
