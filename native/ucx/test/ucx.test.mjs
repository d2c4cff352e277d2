// The module itself, one process at a time: availability, CUDA probing, mapFile, the stub, errors, two
// workers in one process, and GETs from a mapFile region. Two-process transfers per transport are in
// transport-*.test.mjs (each file runs in its own process). Run all: npm test -w @robustrl/ucx
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { ucx, sha, shmPath, startServer, connectClient, closeClientAndServer } from './helpers.mjs';

const MiB = 1 << 20;
const pkgDir = new URL('..', import.meta.url).pathname;

test('module reports itself available, UCX version, CUDA support from the UCX context', () => {
  const info = ucx.ucxInfo();
  assert.equal(info.available, true, info.reason ?? '');
  assert.match(info.version, /^1\.\d+\.\d+$/);
  // Either value is valid (it depends on the UCX build); the module's probe context and a worker's
  // own context (both configured from the environment) must agree.
  assert.equal(typeof info.cudaSupported, 'boolean');
  const w = new ucx.UcxWorker();
  try {
    assert.equal(w.cudaSupported, info.cudaSupported);
  } finally {
    w.close();
  }
});

test("UCX's memory hooks are off unless the environment asks for them (their code patching races with V8's threads)", () => {
  // UCM logs each libc function it patches ('installing bistro hook for mmap') at debug level.
  const code = `const ucx = require('./dist/ucx.js'); ucx.ucxInfo(); const w = new ucx.UcxWorker(); w.close(); console.log(process.env.UCX_MEM_EVENTS);`;
  const run = (extra) =>
    spawnSync(process.execPath, ['-e', code], {
      cwd: pkgDir,
      encoding: 'utf8',
      env: { ...process.env, UCX_MEM_EVENTS: undefined, UCX_MEM_LOG_LEVEL: 'debug', ...extra },
    });
  const byDefault = run({});
  assert.equal(byDefault.status, 0, byDefault.stderr);
  assert.equal(byDefault.stdout.trim(), 'no');
  assert.doesNotMatch(byDefault.stdout + byDefault.stderr, /bistro hook/);
  // With the hooks on, the race this test's title names can crash the child (a SIGSEGV inside V8, seen once in
  // CI): that is the reason they are off, not a failure of the switch. Such a crash is tried again, twice at most.
  let asked = run({ UCX_MEM_EVENTS: 'yes' });
  for (let retry = 0; retry < 2 && asked.status === null && asked.signal !== null; retry++) asked = run({ UCX_MEM_EVENTS: 'yes' });
  assert.equal(asked.status, 0, asked.stderr);
  assert.equal(asked.stdout.trim().split('\n').pop(), 'yes');
  assert.match(asked.stdout + asked.stderr, /installing bistro hook for mmap/);
});

test('mapDevice without CUDA support throws UcxUnavailableError', (t) => {
  if (ucx.ucxInfo().cudaSupported) return t.skip('this UCX supports CUDA (see the CUDA test)');
  const w = new ucx.UcxWorker();
  try {
    assert.throws(
      () => w.mapDevice(0x7f0000000000n, 4096, 'cuda'),
      (e) => e instanceof ucx.UcxUnavailableError && /CUDA/.test(e.message),
    );
    assert.throws(() => w.mapDevice(0x7f0000000000n, 4096, 'rocm'), TypeError);
    assert.equal(w.stats().mappings, 0);
  } finally {
    w.close();
  }
});

test('mapDevice registers CUDA memory', (t) => {
  const info = ucx.ucxInfo();
  if (!info.cudaSupported) {
    return t.skip(
      `no CUDA-enabled UCX: UCX ${info.version} reports no UCS_MEMORY_TYPE_CUDA in ucp_context_query memory types (Debian's UCX is built without CUDA; libucx-cu12 has it)`,
    );
  }
  // With CUDA: argument checks and the typed result. Registering real device memory needs a device
  // allocation, which this package has no API for; a GET into device memory is left to the agent's
  // GPU integration tests.
  const w = new ucx.UcxWorker();
  try {
    assert.equal(w.cudaSupported, true);
    assert.throws(() => w.mapDevice(0n, 4096, 'cuda'), TypeError);
    assert.throws(() => w.mapDevice(0x7f0000000000n, 0, 'cuda'), RangeError);
  } finally {
    w.close();
  }
});

describe('mapFile (/dev/shm)', () => {
  const files = [];
  const tmp = (what) => {
    const p = shmPath(what);
    files.push(p);
    return p;
  };
  after(() => {
    for (const f of files) rmSync(f, { force: true });
  });

  test('reads what another process wrote; our writes are shared; unmap detaches the Buffer', () => {
    const path = tmp('pattern');
    const n = 3 * MiB + 7;
    const byteAt = (i) => (i * 131 + (i >> 11)) & 0xff;
    // A second process writes the pattern (as a trainer would) and reports its sha256.
    const writer = `
      const b = Buffer.alloc(${n});
      for (let i = 0; i < b.length; i++) b[i] = (${byteAt.toString()})(i);
      require('node:fs').writeFileSync(${JSON.stringify(path)}, b);
      process.stdout.write(require('node:crypto').createHash('sha256').update(b).digest('hex'));`;
    const r = spawnSync(process.execPath, ['-e', writer], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const w = new ucx.UcxWorker();
    try {
      const region = w.mapFile(path, n);
      assert.equal(region.length, n);
      assert.equal(region.memoryType, 'host');
      assert.equal(region.buffer.length, n);
      assert.equal(region.buffer[n - 1], byteAt(n - 1));
      assert.equal(sha(region.buffer), r.stdout);
      assert.ok(region.packRkey().length > 0);
      // A mapping may cover only a prefix of a longer file.
      const prefix = w.mapFile(path, 4096);
      assert.equal(sha(prefix.buffer), sha(region.buffer.subarray(0, 4096)));
      prefix.unmap();
      // MAP_SHARED: what we write lands in the file, and another process reads it.
      randomFillSync(region.buffer, 1000, 65536);
      const reader = spawnSync(
        process.execPath,
        [
          '-e',
          `process.stdout.write(require('node:crypto').createHash('sha256').update(require('node:fs').readFileSync(${JSON.stringify(path)})).digest('hex'))`,
        ],
        { encoding: 'utf8' },
      );
      assert.equal(reader.stdout, sha(region.buffer));
      const view = region.buffer;
      region.unmap();
      assert.equal(region.mapped, false);
      assert.equal(view.length, 0); // detached before munmap: JS can no longer reach the unmapped pages
      assert.equal(statSync(path).size, n); // the file itself stays
      assert.equal(w.stats().mappings, 0);
    } finally {
      w.close();
    }
  });

  test('create: creates (0600) and grows the file, never shrinks it', () => {
    const path = tmp('create');
    const w = new ucx.UcxWorker();
    try {
      const r1 = w.mapFile(path, MiB, { create: true });
      assert.equal(statSync(path).size, MiB);
      assert.equal(statSync(path).mode & 0o777, 0o600);
      r1.buffer.fill(7, 0, 100);
      r1.unmap();
      const r2 = w.mapFile(path, 2 * MiB, { create: true });
      assert.equal(statSync(path).size, 2 * MiB);
      assert.deepEqual([r2.buffer[99], r2.buffer[100], r2.buffer[2 * MiB - 1]], [7, 0, 0]);
      r2.unmap();
      w.mapFile(path, 4096, { create: true }).unmap();
      assert.equal(statSync(path).size, 2 * MiB);
    } finally {
      w.close();
    }
  });

  test('errors: ENOENT, file shorter than length, not a regular file, directory, zero length', () => {
    const w = new ucx.UcxWorker();
    try {
      const missing = tmp('missing');
      assert.throws(
        () => w.mapFile(missing, 4096),
        (e) => e instanceof ucx.UcxError && e.code === 'ENOENT' && e.message.includes(missing) && /No such file/.test(e.message) && e.cause?.errno === 2,
      );
      assert.equal(existsSync(missing), false);
      const short = tmp('short');
      writeFileSync(short, Buffer.alloc(1000));
      assert.throws(
        () => w.mapFile(short, 4096),
        (e) => e instanceof RangeError && /1000 bytes/.test(e.message),
      );
      assert.throws(() => w.mapFile(short, 0), RangeError);
      assert.throws(() => w.mapFile('/dev/null', 4096), TypeError);
      assert.throws(
        () => w.mapFile('/dev/shm', 4096),
        (e) => e instanceof ucx.UcxError && e.code === 'EISDIR',
      );
      assert.equal(w.stats().mappings, 0);
    } finally {
      w.close();
    }
  });

  test('errors: EACCES for a file this process may not open read-write', (t) => {
    const path = tmp('eacces');
    writeFileSync(path, Buffer.alloc(4096));
    chmodSync(path, 0o400);
    const code = `
      const ucx = require('./dist/ucx.js');
      const w = new ucx.UcxWorker();
      let out;
      try { w.mapFile(${JSON.stringify(path)}, 4096); out = { mapped: true }; }
      catch (e) { out = { name: e.name, code: e.code, typed: e instanceof ucx.UcxError, msg: e.message }; }
      w.close();
      console.log(JSON.stringify(out));`;
    // root ignores file modes: then run the check as 'nobody'.
    const opts = { cwd: pkgDir, encoding: 'utf8' };
    if (process.getuid?.() === 0) Object.assign(opts, { uid: 65534, gid: 65534 });
    const r = spawnSync(process.execPath, ['-e', code], opts);
    if (r.error) return t.skip(`cannot run the check as another user: ${r.error.message}`);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').pop());
    assert.equal(out.typed, true, JSON.stringify(out));
    assert.equal(out.code, 'EACCES', out.msg);
  });
});

// The agent's same-host path: the server serves weights straight from a /dev/shm file (mapFile).
for (const [name, copts] of [
  ['sockaddr ep (peer error handling)', {}],
  ['worker-address ep, errorHandling none', { rma: 'worker-address', errorHandling: 'none' }],
]) {
  describe(`GET from a server's mapFile region over ${name}`, () => {
    const SIZE = 64 * MiB + 4096;
    let server, client;
    const file = shmPath('server-source');
    before(async () => {
      server = await startServer(SIZE, 1, undefined, { file });
      client = await connectClient(server.port, undefined, copts);
    });
    after(async () => {
      await closeClientAndServer(client, server);
      rmSync(file, { force: true });
    });

    test('GET 1 B .. 64 MiB is byte-exact (SHA-256 against the file)', async () => {
      // The server filled its mapping with random bytes; MAP_SHARED puts them in the file.
      const source = readFileSync(file);
      assert.equal(source.length, SIZE);
      assert.equal((await client.request({ op: 'sha', region: 'a', off: 0, len: SIZE })).toString(), sha(source));
      const local = Buffer.alloc(64 * MiB + 64);
      const lr = client.worker.map(local);
      try {
        for (const [size, srcOff, dstOff] of [
          [1, 0, 0],
          [1, 4095, 3],
          [7, 1, 5],
          [4096, 4096, 0],
          [65537, 999, 17],
          [MiB + 3, 5 * MiB + 1, 1],
          [16 * MiB, 7, 64],
          [64 * MiB, 0, 0],
          [64 * MiB, 4096, 64],
        ]) {
          local.fill(0);
          await client.ep.get(lr, dstOff, client.a, srcOff, size, { timeoutMs: 60000 });
          assert.equal(
            sha(local.subarray(dstOff, dstOff + size)),
            sha(source.subarray(srcOff, srcOff + size)),
            `GET size=${size} srcOff=${srcOff} dstOff=${dstOff}`,
          );
        }
      } finally {
        lr.unmap();
      }
    });
  });
}

test('stub build loads and reports unavailable cleanly', () => {
  const code = `
    const ucx = require('./dist/ucx.js');
    const info = ucx.ucxInfo();
    let err; try { new ucx.UcxWorker(); } catch (e) { err = e; }
    console.log(JSON.stringify({ info, name: err && err.name, isTyped: err instanceof ucx.UcxUnavailableError, msg: err && err.message }));`;
  const r = spawnSync(process.execPath, ['-e', code], {
    cwd: new URL('..', import.meta.url).pathname,
    env: { ...process.env, ROBUSTRL_UCX_ADDON: 'build/Release/ucx_stub.node' },
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.info.available, false);
  assert.match(out.info.reason, /stub/);
  assert.equal(out.isTyped, true);
  assert.equal(out.name, 'UcxUnavailableError');
  // A missing addon is reported the same way.
  const r2 = spawnSync(process.execPath, ['-e', code], {
    cwd: new URL('..', import.meta.url).pathname,
    env: { ...process.env, ROBUSTRL_UCX_ADDON: 'build/Release/does-not-exist.node' },
    encoding: 'utf8',
  });
  assert.equal(JSON.parse(r2.stdout).isTyped, true);
});

test('errors: connect to a closed port, recv timeout, ops on a closed endpoint', async () => {
  const w = new ucx.UcxWorker({ config: { TLS: 'tcp' } });
  try {
    const t0 = Date.now();
    await assert.rejects(w.connect('127.0.0.1', 1, { timeoutMs: 5000 }), (e) => e instanceof ucx.PeerUnreachableError || e instanceof ucx.TimeoutError);
    assert.ok(Date.now() - t0 < 6000);
    await assert.rejects(w.recvTag(77n, { timeoutMs: 100 }), ucx.TimeoutError);
    const l = w.listen({ host: '127.0.0.1', port: 0 }, () => {});
    assert.ok(l.port > 0);
    const ep = await w.connect('127.0.0.1', l.port, { timeoutMs: 5000 });
    await ep.close();
    assert.equal(ep.state, 'closed');
    await assert.rejects(ep.sendTag(1n, Buffer.from('x')), ucx.EndpointClosedError);
    await assert.rejects(ep.flush(), ucx.EndpointClosedError);
    l.close();
  } finally {
    w.close();
  }
  await assert.rejects(w.recvTag(1n), ucx.EndpointClosedError); // worker closed
});

test('worker.address / mapAlloc / printInfo (one process, two workers)', async () => {
  const ws = new ucx.UcxWorker(),
    wc = new ucx.UcxWorker();
  try {
    const addr = ws.address();
    assert.ok(Buffer.isBuffer(addr) && addr.length > 0);
    const ep = await wc.connectAddress(addr, { timeoutMs: 5000 });
    assert.match(ep.printInfo(), /lane\[0\]/);
    const src = ws.mapAlloc(MiB + 5);
    assert.equal(src.buffer.length, MiB + 5);
    randomFillSync(src.buffer);
    const dst = wc.mapAlloc(MiB + 5);
    await ep.get(dst, 0, ep.remoteRegion(src.descriptor()), 0, MiB + 5, { timeoutMs: 10000 });
    assert.equal(sha(dst.buffer), sha(src.buffer));
    src.unmap();
    assert.equal(src.buffer.length, 0); // detached before UCX freed it
    await ep.close({ force: true });
    // (no garbage-address test: UCX 1.13 asserts and aborts the process on a malformed address)
  } finally {
    wc.close();
    ws.close();
  }
});

test('access: a region registered for remote read only serves GETs; the access is reported; a bad value is refused', async () => {
  const ws = new ucx.UcxWorker(),
    wc = new ucx.UcxWorker();
  const path = shmPath('remote-read');
  try {
    const ep = await wc.connectAddress(ws.address(), { timeoutMs: 5000 });
    for (const src of [
      ws.map(Buffer.alloc(MiB), { access: 'remote-read' }),
      ws.mapAlloc(MiB, { access: 'remote-read' }),
      ws.mapFile(path, MiB, { create: true, access: 'remote-read' }),
    ]) {
      assert.equal(src.access, 'remote-read');
      randomFillSync(src.buffer);
      const dst = wc.map(Buffer.alloc(MiB));
      assert.equal(dst.access, 'read-write');
      await ep.get(dst, 0, ep.remoteRegion(src.descriptor()), 0, MiB, { timeoutMs: 10000 });
      assert.equal(sha(dst.buffer), sha(src.buffer));
      src.unmap();
      dst.unmap();
    }
    assert.throws(() => ws.map(Buffer.alloc(16), { access: 'write-only' }), /access must be 'read-write' or 'remote-read'/);
    await ep.close({ force: true });
  } finally {
    wc.close();
    ws.close();
    rmSync(path, { force: true });
  }
});
