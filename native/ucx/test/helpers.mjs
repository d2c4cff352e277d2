import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
const require = createRequire(import.meta.url);
export const ucx = require('../dist/ucx.js');
export const TAG_DESC = 1n,
  TAG_REQ = 2n,
  TAG_RESP = 3n;
export const sha = (b) => createHash('sha256').update(b).digest('hex');

/** A fresh /dev/shm path for one test (removed by the test's teardown). */
let shmSeq = 0;
export const shmPath = (what) => `/dev/shm/robustrl-ucx-test-${process.pid}-${Date.now().toString(36)}-${shmSeq++}-${what}`;

/**
 * Spawns test/server.mjs in a separate process; returns {proc, port}. Region A comes from
 * worker.map(Buffer) by default, from worker.mapAlloc with `alloc`, from worker.mapFile(file) with `file`.
 */
export async function startServer(sizeA, sizeB, tls, { alloc = false, file = null } = {}) {
  const source = alloc ? 'alloc' : file ? `file:${file}` : '';
  const proc = spawn(process.execPath, [new URL('./server.mjs', import.meta.url).pathname, String(sizeA), String(sizeB), tls ?? '', source], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = await once(proc.stdout, 'data');
  return { proc, port: JSON.parse(line.toString()).port };
}

/**
 * Connects a client worker to the server and receives the region descriptors.
 * rma: 'sockaddr' (default) = RMA on the sockaddr endpoint; 'worker-address' = a second endpoint
 * created from the server's worker address carries the RMA (and `ep` is that one; `ctl` is the
 * sockaddr endpoint that carries the tag messages). errorHandling: for the worker-address endpoint.
 */
export async function connectClient(port, tls, { rma = 'sockaddr', errorHandling = 'peer' } = {}) {
  const worker = new ucx.UcxWorker(tls ? { config: { TLS: tls } } : {});
  const ctl = await worker.connect('127.0.0.1', port, { timeoutMs: 10000 });
  const m = await worker.recvTag(TAG_DESC, { timeoutMs: 10000 });
  const d = JSON.parse(m.data.toString());
  // worker-address: the facade's connectRma (receives the server's sendWorkerAddress message and ties the
  // RMA endpoint to ctl, so a peer failure seen on ctl force-closes it); 'worker-address-raw' only
  // uses connectAddress with the address from the descriptor.
  if (rma === 'worker-address') await ctl.sendTag(TAG_REQ, Buffer.from(JSON.stringify({ op: 'worker-address' })), { timeoutMs: 10000 });
  const ep =
    rma === 'worker-address'
      ? await worker.connectRma(ctl, { timeoutMs: 10000, errorHandling })
      : rma === 'worker-address-raw'
        ? await worker.connectAddress(Buffer.from(d.worker, 'base64'), { timeoutMs: 10000, errorHandling })
        : ctl;
  const region = (x) => ep.remoteRegion({ address: BigInt(x.address), length: x.length, rkey: Buffer.from(x.rkey, 'base64') });
  const request = async (req) => {
    await ctl.sendTag(TAG_REQ, Buffer.from(JSON.stringify(req)), { timeoutMs: 10000 });
    return (await worker.recvTag(TAG_RESP, { timeoutMs: 30000, maxLength: 1 << 20 })).data;
  };
  return { worker, ep, ctl, a: region(d.a), b: region(d.b), request };
}

/** Says goodbye to the server, closes the client's endpoints and worker, and kills the server process. */
export async function closeClientAndServer(client, server) {
  await client?.request({ op: 'bye' }).catch(() => {});
  if (client && client.ep !== client.ctl) await client.ep.close().catch(() => {});
  await client?.ctl.close().catch(() => {});
  client?.worker.close();
  server?.proc.kill('SIGKILL');
}
