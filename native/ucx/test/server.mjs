// Test/bench peer: maps a source region A (random bytes) and a PUT target region B, listens on
// 127.0.0.1:0, prints {"port":N} on stdout, and serves a tiny control protocol over tag messages:
//   server -> client  TAG_DESC : JSON {a: descA, b: descB, worker} (address as string, rkey and
//                                worker address as base64)
//   client -> server  TAG_REQ  : JSON {op:'sha', region:'a'|'b', off, len} -> TAG_RESP sha256 hex
//                                JSON {op:'echo', data: base64}            -> TAG_RESP same bytes
//                                JSON {op:'worker-address'} -> worker.sendWorkerAddress(ep) (WORKER_ADDRESS_TAG)
// Usage: node server.mjs <sizeA> <sizeB> [TLS] [alloc | file:<path>]
import { createRequire } from 'node:module';
import { createHash, randomFillSync } from 'node:crypto';
const require = createRequire(import.meta.url);
const ucx = require('../dist/ucx.js');

export const TAG_DESC = 1n,
  TAG_REQ = 2n,
  TAG_RESP = 3n;
const sizeA = Number(process.argv[2] ?? 1 << 20);
const sizeB = Number(process.argv[3] ?? 1 << 20);
const tls = process.argv[4];
const worker = new ucx.UcxWorker(tls ? { config: { TLS: tls } } : {});
// alloc: region A is allocated by UCX (worker.mapAlloc: posix/sysv shared memory) instead of a Node Buffer.
// file:<path>: region A is worker.mapFile(path, sizeA, { create: true }) (e.g. a /dev/shm file); the
// test reads the file itself to check GETs, and removes it.
const alloc = process.argv[5] === 'alloc';
const file = process.argv[5]?.startsWith('file:') ? process.argv[5].slice(5) : null;
const ra = alloc ? worker.mapAlloc(sizeA) : file ? worker.mapFile(file, sizeA, { create: true }) : worker.map(Buffer.allocUnsafe(sizeA));
const a = ra.buffer;
for (let off = 0; off < sizeA; off += 1 << 24) randomFillSync(a, off, Math.min(1 << 24, sizeA - off));
const b = Buffer.alloc(sizeB);
const rb = worker.map(b, process.env.ROBUSTRL_TEST_B_ACCESS ? { access: process.env.ROBUSTRL_TEST_B_ACCESS } : {});
const desc = (r) => ({ address: r.address.toString(), length: r.length, rkey: r.packRkey().toString('base64') });

const listener = worker.listen({ host: '127.0.0.1', port: 0 }, async (ep) => {
  ep.onError(() => {});
  try {
    // worker: this worker's ucp address, for a second (worker-address) endpoint from the client.
    await ep.sendTag(TAG_DESC, Buffer.from(JSON.stringify({ a: desc(ra), b: desc(rb), worker: worker.address().toString('base64') })));
    for (;;) {
      const m = await worker.recvTag(TAG_REQ, { maxLength: 1 << 20 });
      const req = JSON.parse(m.data.toString());
      let resp;
      if (req.op === 'sha') {
        const buf = req.region === 'a' ? a : b;
        resp = Buffer.from(
          createHash('sha256')
            .update(buf.subarray(req.off, req.off + req.len))
            .digest('hex'),
        );
      } else if (req.op === 'echo') resp = Buffer.from(req.data, 'base64');
      else if (req.op === 'worker-address') {
        await worker.sendWorkerAddress(ep);
        continue;
      } // for connectRma
      else if (req.op === 'bye') {
        await ep.sendTag(TAG_RESP, Buffer.from('bye'));
        break;
      }
      await ep.sendTag(TAG_RESP, resp);
    }
  } catch (e) {
    if (!(e instanceof ucx.PeerUnreachableError || e instanceof ucx.EndpointClosedError)) console.error('server:', e);
  }
});
process.stdout.write(JSON.stringify({ port: listener.port, pid: process.pid }) + '\n');
process.on('SIGTERM', () => {
  worker.close();
  process.exit(0);
});
