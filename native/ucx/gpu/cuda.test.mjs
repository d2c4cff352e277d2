// The module on a real GPU (run by gpu/check.sh; skipped where there is no CUDA-enabled UCX and no
// device): CUDA IPC import of another process's allocation, device-to-device GET and PUT between two
// processes byte-exact and not emulated, and a peer killed in the middle of transfers failing them
// instead of hanging. Run: node --test --test-concurrency=1 native/ucx/gpu/cuda.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createInterface } from 'node:readline';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const ucx = require('../dist/ucx.js');
const MiB = 1 << 20;
const info = ucx.ucxInfo();
const gpu = ucx.cuda.info();
const skip = !info.available
  ? `UCX unavailable: ${info.reason}`
  : !info.cudaSupported
    ? `UCX ${info.version} cannot register CUDA memory (build against the libucx-cu13/cu12 wheel: ROBUSTRL_UCX_PREFIX)`
    : !gpu.available
      ? `no usable CUDA device: ${gpu.reason}`
      : false;
const sha = (b) => createHash('sha256').update(b).digest('hex');

/** A child process; resolves its first stdout line (parsed) and lets the test send lines and await answers. */
function child(args) {
  const proc = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = [];
  const waiters = [];
  createInterface({ input: proc.stdout }).on('line', (l) => (waiters.length ? waiters.shift()(JSON.parse(l)) : lines.push(JSON.parse(l))));
  const next = () => (lines.length ? Promise.resolve(lines.shift()) : new Promise((r) => waiters.push(r)));
  return { proc, next, send: (line) => proc.stdin.write(line + '\n') };
}
const peerPath = new URL('./device-peer.cjs', import.meta.url).pathname;
const exporterPath = new URL('../test/fake-cuda/exporter.cjs', import.meta.url).pathname;

test('the module built against a CUDA-enabled UCX, with the cuda_ipc settings it needs', { skip }, () => {
  assert.equal(info.cudaSupported, true);
  assert.ok(gpu.devices.length > 0);
  assert.equal(process.env.UCX_CUDA_IPC_ENABLE_GET_ZCOPY ?? 'unset', 'on', 'the facade sets it where UCX supports CUDA, unless the operator did');
  const w = new ucx.UcxWorker({ cudaDevice: 0 });
  try {
    assert.equal(w.cudaContext, true);
    assert.equal(w.cudaSupported, true);
  } finally {
    w.close();
  }
});

test('a worker created without a CUDA context refuses device memory rather than emulate it', { skip }, () => {
  // A fresh process: in this one, earlier tests made a context current.
  const probe = `const ucx = require(${JSON.stringify(require.resolve('../dist/ucx.js'))});
    const w = new ucx.UcxWorker(); const a = ucx.cuda.alloc(0, 4096); ucx.cuda.useDevice(0);
    try { w.mapDevice(a, 4096, 'cuda'); console.log('mapped'); } catch (e) { console.log(e.code); } finally { w.close(); }`;
  const r = require('node:child_process').spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8' });
  assert.equal(r.stdout.trim(), 'UCX_NO_CUDA_CONTEXT', r.stderr);
});

test('mapIpc: another process exports a device allocation, this one reads and writes it in place', { skip }, async () => {
  const exporter = child([exporterPath]);
  try {
    const fill = Buffer.alloc(8 * MiB);
    for (let i = 0; i < fill.length; i++) fill[i] = (i * 7 + (i >> 12)) & 0xff;
    exporter.send(JSON.stringify({ op: 'alloc', bytes: fill.length, fill: fill.toString('base64'), at: 64 * 1024 }));
    const e = await exporter.next();
    assert.equal(e.error, undefined, e.error);
    const w = new ucx.UcxWorker({ cudaDevice: 0 });
    try {
      const region = w.mapIpc({ handle: Buffer.from(e.handle, 'base64'), offset: e.offset, length: fill.length, device: 0 }, { access: 'remote-read' });
      assert.equal(region.memoryType, 'cuda');
      assert.equal(sha(region.read(0, fill.length)), sha(fill));
      assert.equal(sha(region.readSamples([0, MiB, 5 * MiB], 4096)), sha(Buffer.concat([0, MiB, 5 * MiB].map((o) => fill.subarray(o, o + 4096)))));
      region.write(123, Buffer.from('from the importer'));
      exporter.send(JSON.stringify({ op: 'read', address: e.address, offset: 64 * 1024 + 123, length: 17 }));
      assert.equal(Buffer.from((await exporter.next()).bytes, 'base64').toString(), 'from the importer');
      region.unmap();
    } finally {
      w.close();
    }
  } finally {
    exporter.proc.kill();
  }
});

test(
  "a peer GETs a framework's buffer this process imported: from a copy of our own (how an agent serves a trainer's buckets), not emulated",
  { skip },
  async () => {
    // UCX's cuda_ipc packs an rkey by exporting the memory again (cuIpcGetMemHandle), which the driver
    // refuses for memory this process imported itself: UCX then emulates GETs over tcp. mapIpc's copy
    // option serves a device copy in an allocation of our own instead. Both are measured here; the copy
    // must not be emulated, and the direct import's protocol is printed (emulated on the drivers we know).
    const exporter = child([exporterPath]);
    const w = new ucx.UcxWorker({ cudaDevice: 0 });
    try {
      const size = 64 * MiB;
      exporter.send(JSON.stringify({ op: 'alloc', bytes: size, seed: 11 }));
      const e = await exporter.next();
      assert.equal(e.error, undefined, e.error);
      exporter.send(JSON.stringify({ op: 'digest', address: e.address, offset: 0, length: size }));
      const expected = (await exporter.next()).sha256;
      const listener = w.listen({ host: '127.0.0.1', port: 0 }, () => {});
      const pull = async (copy) => {
        const region = w.mapIpc({ handle: Buffer.from(e.handle, 'base64'), offset: e.offset, length: size, device: 0 }, { access: 'remote-read', copy });
        const d = region.descriptor();
        const puller = child([peerPath, 'pull', String(listener.port), `0x${d.address.toString(16)}`, String(d.length), d.rkey.toString('base64')]);
        const got = await puller.next();
        region.unmap();
        assert.equal(got.error, undefined, got.error);
        assert.equal(got.sha256, expected, 'byte-exact');
        return got.protocol;
      };
      const copied = await pull(true);
      console.log(`# GET of a copy of imported memory: ${copied}`);
      assert.equal(ucx.isEmulatedProtocol(copied), false, `GET of the copy emulated: ${copied}`);
      // About 5 s where it is emulated (12 MB/s on an H200).
      const direct = await pull(false).catch((err) => `failed: ${err.message}`);
      console.log(`# GET of imported memory itself: ${direct}${ucx.isEmulatedProtocol(direct) ? ' (emulated: why the agent copies)' : ''}`);
      listener.close();
    } finally {
      w.close();
      exporter.proc.kill();
    }
  },
);

test('device GET and PUT between two processes: byte-exact, and UCX says how (not emulated)', { skip }, async () => {
  const size = 256 * MiB;
  const peer = child([peerPath, String(size), '7']);
  const w = new ucx.UcxWorker({ cudaDevice: 0 });
  try {
    const d = await peer.next();
    const ep = await w.connect('127.0.0.1', d.port, { timeoutMs: 15_000 });
    const remote = ep.remoteRegion({ address: BigInt(d.address), length: d.length, rkey: Buffer.from(d.rkey, 'base64') });
    const local = ucx.cuda.alloc(0, size);
    const region = w.mapDevice(local, size, 'cuda');
    const protocol = await ep.getDescribed(region, 0, remote, 0, 64 * MiB, { timeoutMs: 30_000 });
    await Promise.all([1, 2, 3].map((k) => ep.get(region, k * 64 * MiB, remote, k * 64 * MiB, 64 * MiB, { timeoutMs: 30_000 })));
    peer.send('digest');
    const theirs = (await peer.next()).sha256;
    assert.equal(sha(region.read(0, size)), theirs, 'GET byte-exact');
    console.log(`# GET protocol: ${protocol}`);
    assert.equal(ucx.isEmulatedProtocol(protocol), false, `device GET emulated: ${protocol}`);
    // PUT a different pattern back over the peer's memory, then compare.
    const other = Buffer.alloc(size);
    for (let i = 0; i < size; i += 4096) other.writeUInt32LE((i * 2654435761) >>> 0, i);
    region.write(0, other);
    const putProtocol = await ep.putDescribed(region, 0, remote, 0, size, { timeoutMs: 30_000 });
    peer.send('digest');
    assert.equal((await peer.next()).sha256, sha(other), 'PUT byte-exact');
    assert.equal(ucx.isEmulatedProtocol(putProtocol), false, `device PUT emulated: ${putProtocol}`);
    region.unmap();
    ucx.cuda.free(local);
    await ep.close({ force: true });
  } finally {
    w.close();
    peer.proc.kill('SIGKILL');
  }
});

test('a peer killed while GETs run: they fail (PeerUnreachableError or a closed endpoint), none hangs', { skip }, async () => {
  const size = 256 * MiB;
  const peer = child([peerPath, String(size), '9']);
  const w = new ucx.UcxWorker({ cudaDevice: 0 });
  const local = ucx.cuda.alloc(0, size);
  try {
    const d = await peer.next();
    const ep = await w.connect('127.0.0.1', d.port, { timeoutMs: 15_000 });
    const remote = ep.remoteRegion({ address: BigInt(d.address), length: d.length, rkey: Buffer.from(d.rkey, 'base64') });
    const region = w.mapDevice(local, size, 'cuda');
    let failure = null;
    let completed = 0;
    const deadline = Date.now() + 20_000;
    const loop = async () => {
      while (!failure && Date.now() < deadline) {
        try {
          await ep.get(region, 0, remote, 0, size, { timeoutMs: 10_000 });
          completed++;
        } catch (err) {
          failure = err;
        }
      }
    };
    const running = Promise.all([loop(), loop(), loop(), loop()]);
    await new Promise((r) => setTimeout(r, 300));
    peer.proc.kill('SIGKILL');
    const killedAt = Date.now();
    await running;
    assert.ok(failure, `GETs kept completing for 20 s after the peer was killed (${completed} done)`);
    assert.ok(
      failure instanceof ucx.PeerUnreachableError || failure instanceof ucx.EndpointClosedError || failure instanceof ucx.TimeoutError,
      `unexpected ${failure?.name}: ${failure?.message}`,
    );
    console.log(`# ${completed} GETs completed; failed ${Date.now() - killedAt} ms after the kill: ${failure.name} ${failure.code}`);
    region.unmap();
  } finally {
    ucx.cuda.free(local);
    w.close();
  }
});
