// CUDA IPC import (worker.mapIpc) on any machine: the addon is pointed at a stand-in CUDA driver
// (fake-cuda/fake-libcuda.c: "device memory" in /dev/shm, reported as host memory, so UCX registers it
// as such) and another process exports allocations as IPC handles, as a framework exports its tensors.
// What this covers is the module's part: opening a handle once per process and counting its users,
// closing it on the last unmap, range checks, the driver's refusals as typed errors, and RMA from and
// into the imported memory. Real device memory is covered by gpu/check.sh on a GPU machine.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fakeCudaDriver } from './fake-cuda/fake-driver.mjs';

const built = fakeCudaDriver();
// Read by the addon when it first loads the driver (lazily, on the first CUDA call).
if (built.path) process.env.ROBUSTRL_CUDA_DRIVER = built.path;
const { ucx } = await import('./helpers.mjs');

const KiB = 1024;
const pattern = (n, seed) => {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed + (i >> 9)) & 0xff;
  return b;
};

/** A framework's process: allocates "device" buffers on request and exports them (fake-cuda/exporter.cjs). */
class Exporter {
  constructor() {
    this.proc = spawn(process.execPath, [new URL('./fake-cuda/exporter.cjs', import.meta.url).pathname], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: process.env,
    });
    this.pending = [];
    createInterface({ input: this.proc.stdout }).on('line', (l) => this.pending.shift()?.(JSON.parse(l)));
  }
  call(req) {
    return new Promise((resolve) => {
      this.pending.push(resolve);
      this.proc.stdin.write(JSON.stringify(req) + '\n');
    });
  }
  close() {
    this.proc.kill();
  }
}

/** The /dev/shm mappings of the stand-in driver in this process: how many IPC openings are alive. */
const openedHere = () =>
  readFileSync('/proc/self/maps', 'utf8')
    .split('\n')
    .filter((l) => l.includes('/dev/shm/robustrl-fakecuda-')).length;

let exporter;
before(() => {
  exporter = new Exporter();
});
after(() => exporter?.close());

test('cuda.info() reads the driver the addon was pointed at (and says why not where there is none)', (t) => {
  if (!built.path) return t.skip(built.why);
  const info = ucx.cuda.info();
  assert.equal(info.available, true, info.reason ?? '');
  assert.equal(info.driverPath, built.path);
  assert.deepEqual(
    info.devices.map((d) => d.index),
    [0],
  );
});

test("mapIpc opens another process's allocation: the bytes it wrote, at the offset the handle names; unmap closes it", async (t) => {
  if (!built.path) return t.skip(built.why);
  const fill = pattern(256 * KiB, 7);
  const e = await exporter.call({ op: 'alloc', bytes: fill.length, fill: fill.toString('base64'), at: 4 * KiB });
  assert.equal(e.offset, 4 * KiB);
  const w = new ucx.UcxWorker({ cudaDevice: 0 });
  try {
    assert.equal(w.cudaContext, true);
    const before = openedHere();
    const region = w.mapIpc({ handle: Buffer.from(e.handle, 'base64'), offset: e.offset, length: 64 * KiB, device: 0 }, { access: 'remote-read' });
    assert.equal(region.length, 64 * KiB);
    assert.equal(region.access, 'remote-read');
    assert.ok(region.read(0, 64 * KiB).equals(fill.subarray(0, 64 * KiB)));
    assert.equal(e.allocationBytes, 4 * KiB + fill.length);
    // A second region of the same allocation shares the first opening (the driver refuses a second one).
    const whole = w.mapIpc({ handle: Buffer.from(e.handle, 'base64'), offset: 0, length: e.allocationBytes, device: 0 });
    assert.equal(openedHere(), before + 1);
    whole.write(100, Buffer.from('written by the importer'));
    assert.equal(
      Buffer.from((await exporter.call({ op: 'read', address: e.address, offset: 100, length: 23 })).bytes, 'base64').toString(),
      'written by the importer',
    );
    region.unmap();
    assert.equal(openedHere(), before + 1, 'still open: the other region uses it');
    whole.unmap();
    assert.equal(openedHere(), before, 'closed with its last region');
    assert.equal(w.stats().mappings, 0);
  } finally {
    w.close();
  }
});

test('mapIpc refuses a range outside the allocation, a malformed handle and a freed allocation, each with a typed error', async (t) => {
  if (!built.path) return t.skip(built.why);
  const fill = pattern(64 * KiB, 1);
  const e = await exporter.call({ op: 'alloc', bytes: fill.length, fill: fill.toString('base64') });
  const w = new ucx.UcxWorker({ cudaDevice: 0 });
  try {
    const handle = Buffer.from(e.handle, 'base64');
    const before = openedHere();
    assert.throws(
      () => w.mapIpc({ handle, offset: 60 * KiB, length: 8 * KiB, device: 0 }),
      (x) => x instanceof RangeError && /outside the exported allocation of 65536 bytes/.test(x.message),
    );
    assert.equal(openedHere(), before, 'a refused range leaves nothing open');
    assert.throws(() => w.mapIpc({ handle: handle.subarray(0, 32), length: 1, device: 0 }), TypeError);
    assert.throws(
      () => w.mapIpc({ handle, length: 1, device: 3 }),
      (x) => x instanceof ucx.CudaError && x.code === 'CUDA_ERROR_INVALID_DEVICE',
    );
    await exporter.call({ op: 'free', address: e.address });
    assert.throws(
      () => w.mapIpc({ handle, length: 1024, device: 0 }),
      (x) => x instanceof ucx.CudaError && x.code === 'CUDA_ERROR_INVALID_VALUE' && /cuIpcOpenMemHandle/.test(x.message),
    );
    assert.equal(w.stats().mappings, 0);
  } finally {
    w.close();
  }
});

test('a peer GETs from imported memory and PUTs into it, byte-exact; the GET can describe its protocol', async (t) => {
  if (!built.path) return t.skip(built.why);
  const fill = pattern(1024 * KiB, 3);
  const e = await exporter.call({ op: 'alloc', bytes: fill.length, fill: fill.toString('base64') });
  const source = new ucx.UcxWorker({ cudaDevice: 0 });
  const puller = new ucx.UcxWorker();
  try {
    const region = source.mapIpc({ handle: Buffer.from(e.handle, 'base64'), offset: 0, length: fill.length, device: 0 });
    const listener = source.listen({ host: '127.0.0.1', port: 0 }, () => {});
    const ep = await puller.connect('127.0.0.1', listener.port, { timeoutMs: 10_000 });
    const remote = ep.remoteRegion(region.descriptor());
    const into = Buffer.alloc(fill.length);
    const local = puller.map(into);
    const protocol = await ep.getDescribed(local, 0, remote, 0, 512 * KiB, { timeoutMs: 10_000 });
    assert.equal(typeof protocol, 'string');
    assert.ok(protocol.length > 0);
    await ep.get(local, 512 * KiB, remote, 512 * KiB, 512 * KiB, { timeoutMs: 10_000 });
    assert.ok(into.equals(fill));
    const update = pattern(4 * KiB, 99);
    await ep.put(puller.map(update), 0, remote, 8 * KiB, update.length, { timeoutMs: 10_000 });
    assert.equal((await exporter.call({ op: 'read', address: e.address, offset: 8 * KiB, length: update.length })).bytes, update.toString('base64'));
    await ep.close({ force: true });
    listener.close();
  } finally {
    puller.close();
    source.close();
  }
});

test('mapIpc with copy: a peer GETs a copy of our own; the handle is closed at once, the exporter may change its bytes, unmap frees the copy', async (t) => {
  if (!built.path) return t.skip(built.why);
  const fill = pattern(512 * KiB, 5);
  const e = await exporter.call({ op: 'alloc', bytes: fill.length, fill: fill.toString('base64'), at: 8 * KiB });
  const ours = () =>
    readFileSync('/proc/self/maps', 'utf8')
      .split('\n')
      .filter((l) => l.includes(`/dev/shm/robustrl-fakecuda-${process.pid}-`)).length;
  const source = new ucx.UcxWorker({ cudaDevice: 0 });
  const puller = new ucx.UcxWorker();
  try {
    const [openedBefore, oursBefore] = [openedHere(), ours()];
    const region = source.mapIpc(
      { handle: Buffer.from(e.handle, 'base64'), offset: e.offset, length: fill.length, device: 0 },
      { access: 'remote-read', copy: true },
    );
    assert.equal(ours(), oursBefore + 1, 'an allocation of our own holds the copy');
    assert.equal(openedHere() - ours(), openedBefore - oursBefore, 'the imported handle is closed already');
    assert.notEqual(region.address, BigInt(e.address) + BigInt(e.offset));
    assert.equal(region.access, 'remote-read');
    // The exporter overwrites its buffer: the copy keeps the version as it was when mapped.
    await exporter.call({ op: 'write', address: e.address, offset: e.offset, bytes: Buffer.alloc(4 * KiB, 0xee).toString('base64') });
    const listener = source.listen({ host: '127.0.0.1', port: 0 }, () => {});
    const ep = await puller.connect('127.0.0.1', listener.port, { timeoutMs: 10_000 });
    const into = Buffer.alloc(fill.length);
    await ep.get(puller.map(into), 0, ep.remoteRegion(region.descriptor()), 0, fill.length, { timeoutMs: 10_000 });
    assert.ok(into.equals(fill), 'byte-exact, as it was when copied');
    await ep.close({ force: true });
    listener.close();
    region.unmap();
    assert.equal(ours(), oursBefore, 'unmap freed the copy');
    assert.equal(source.stats().mappings, 0);
  } finally {
    puller.close();
    source.close();
  }
});

test('isEmulatedProtocol tells a software emulation from a direct protocol', () => {
  assert.equal(ucx.isEmulatedProtocol('flags:0xc4 get() from cuda/GPU0 to host memory length 1048576 software emulation tcp/lo 0.1 MB/s'), true);
  assert.equal(ucx.isEmulatedProtocol('get() from cuda/GPU0 to cuda/GPU0 length 268435456 zero-copy cuda_ipc/cuda 900 GB/s'), false);
});

test('without a driver the CUDA functions say why (a process pointed at a missing library)', async () => {
  const probe = `const { cuda } = require(${JSON.stringify(new URL('../dist/ucx.js', import.meta.url).pathname)});
    const i = cuda.info();
    let code = null; try { cuda.alloc(0, 16); } catch (e) { code = e.code + ' ' + e.name; }
    process.stdout.write(JSON.stringify({ available: i.available, reason: i.reason, code }));`;
  const child = spawn(process.execPath, ['-e', probe], {
    env: { ...process.env, ROBUSTRL_CUDA_DRIVER: '/nonexistent/libcuda.so.1' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [out] = await Promise.all([new Promise((r) => child.stdout.once('data', r)), once(child, 'exit')]);
  const r = JSON.parse(out.toString());
  assert.equal(r.available, false);
  assert.match(r.reason, /\/nonexistent\/libcuda\.so\.1.*could not be loaded/);
  assert.equal(r.code, 'CUDA_UNAVAILABLE UcxUnavailableError');
});
