// Run: node --test test/ucx.test.mjs   (in native/ucx, after building; see README)
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { ucx, sha, startServer, connectClient } from './helpers.mjs';

const MiB = 1 << 20;
// [name, TLS, connectClient options]. 'worker-address' = GET/PUT on a second endpoint created from the
// server's worker address (the sockaddr endpoint carries the tag messages). errorHandling 'none' is what
// lets UCX 1.13 pick shared memory / cma; 'peer' keeps it on tcp (see README).
const transports = [
  ['tcp', 'tcp', {}],
  ['UCX default selection (sockaddr ep)', undefined, {}],
  ['worker-address ep, errorHandling peer', undefined, { rma: 'worker-address', errorHandling: 'peer' }],
  ['worker-address ep, errorHandling none (shm/cma)', undefined, { rma: 'worker-address', errorHandling: 'none' }],
];

test('module reports itself available, UCX version, no CUDA', () => {
  const info = ucx.ucxInfo();
  assert.equal(info.available, true, info.reason ?? '');
  assert.match(info.version, /^1\.\d+\.\d+$/);
  assert.equal(info.cudaSupported, false);
});

test('stub build loads and reports unavailable cleanly', () => {
  const code = `
    const ucx = require('./lib/ucx.js');
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
  const ws = new ucx.UcxWorker(), wc = new ucx.UcxWorker();
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

for (const [name, tls, copts] of transports) {
  describe(`two processes over ${name}`, () => {
    let server, client;
    before(async () => {
      server = await startServer(256 * MiB, 64 * MiB, tls);
      client = await connectClient(server.port, tls, copts);
    });
    after(async () => {
      await client?.request({ op: 'bye' }).catch(() => {});
      if (client && client.ep !== client.ctl) await client.ep.close().catch(() => {});
      await client?.ctl.close().catch(() => {});
      client?.worker.close();
      server?.proc.kill('SIGKILL');
    });

    test('tagged send/recv round trip', async () => {
      for (const n of [0, 1, 100, 8192, 200 * 1024]) {
        const payload = randomFillSync(Buffer.alloc(n));
        const echoed = await client.request({ op: 'echo', data: payload.toString('base64') });
        assert.equal(sha(echoed), sha(payload), `echo of ${n} bytes`);
      }
    });

    test('GET 1 B .. 256 MiB is byte-exact (SHA-256)', async () => {
      const local = Buffer.alloc(256 * MiB + 64);
      const lr = client.worker.map(local);
      try {
        for (const [size, srcOff, dstOff] of [[1, 0, 0], [1, 12345, 3], [7, 1, 5], [4096, 4096, 0], [65537, 999, 17], [MiB + 3, 5 * MiB + 1, 1], [16 * MiB, 7, 64], [64 * MiB, 0, 0], [256 * MiB, 0, 64]]) {
          await client.ep.get(lr, dstOff, client.a, srcOff, size, { timeoutMs: 60000 });
          const remote = (await client.request({ op: 'sha', region: 'a', off: srcOff, len: size })).toString();
          assert.equal(sha(local.subarray(dstOff, dstOff + size)), remote, `GET size=${size} srcOff=${srcOff} dstOff=${dstOff}`);
        }
      } finally {
        lr.unmap();
      }
      assert.equal(lr.mapped, false);
    });

    test('PUT 1 B .. 64 MiB is byte-exact (SHA-256)', async () => {
      const src = randomFillSync(Buffer.alloc(64 * MiB));
      const sr = client.worker.map(src);
      for (const [size, srcOff, dstOff] of [[1, 0, 0], [13, 3, 5], [4097, 100, 4095], [MiB, 0, MiB + 1], [64 * MiB, 0, 0]]) {
        await client.ep.put(sr, srcOff, client.b, dstOff, size, { timeoutMs: 60000 });
        const remote = (await client.request({ op: 'sha', region: 'b', off: dstOff, len: size })).toString();
        assert.equal(remote, sha(src.subarray(srcOff, srcOff + size)), `PUT size=${size}`);
      }
      sr.unmap();
    });

    test('range checks reject instead of corrupting memory', async () => {
      const lr = client.worker.map(Buffer.alloc(16));
      await assert.rejects(client.ep.get(lr, 8, client.a, 0, 16), (e) => e instanceof ucx.UcxError && e.code === 'UCS_ERR_OUT_OF_RANGE');
      assert.throws(() => client.ep.get(lr, 0, client.a, client.a.length - 1, 2), RangeError);
      lr.unmap();
    });
  });

  // errorHandling 'none': UCX does not report the dead peer on the RMA ep, and in this test the control
  // (sockaddr) ep's failure was not delivered either while the 8 cma GETs were stuck: they only
  // rejected by their 60 s timeout. Known gap, see README ("Peer failure with errorHandling 'none'").
  const skip = copts.errorHandling === 'none' ? 'known gap: no bounded peer-failure detection with errorHandling none (README)' : false;
  test(`SIGKILL of the server mid-GET rejects within a bounded time (${name})`, { skip }, async () => {
    const BOUND_MS = 5000;
    const server = await startServer(256 * MiB, 1, tls);
    const client = await connectClient(server.port, tls, copts);
    const local = Buffer.alloc(256 * MiB);
    const lr = client.worker.map(local);
    let epError = null;
    client.ep.onError((e) => { epError = e; });
    try {
      await client.ep.get(lr, 0, client.a, 0, 256 * MiB, { timeoutMs: 60000 }); // warm-up, succeeds
      // Keep large GETs in flight and kill the server while they run.
      const started = Date.now();
      let killedAt = 0;
      const results = [];
      const inflight = [];
      for (let i = 0; i < 8; i++) {
        inflight.push(client.ep.get(lr, 0, client.a, 0, 256 * MiB, { timeoutMs: 60000 }).then(
          () => results.push({ ok: true, at: Date.now() }),
          (e) => results.push({ ok: false, e, at: Date.now() }),
        ));
      }
      setTimeout(() => { killedAt = Date.now(); server.proc.kill('SIGKILL'); }, 5);
      await Promise.all(inflight);
      const failed = results.filter((r) => !r.ok);
      assert.ok(failed.length > 0, `no GET failed (${results.length} completed, killed ${killedAt - started} ms after start)`);
      for (const f of failed) {
        assert.ok(f.e instanceof ucx.PeerUnreachableError || f.e instanceof ucx.EndpointClosedError, `unexpected ${f.e?.name}: ${f.e?.message}`);
        assert.ok(f.at - killedAt < BOUND_MS, `rejected ${f.at - killedAt} ms after SIGKILL (bound ${BOUND_MS} ms)`);
      }
      const worst = Math.max(...failed.map((f) => f.at - killedAt));
      console.log(`# ${name}: ${failed.length}/8 GETs rejected, worst ${worst} ms after SIGKILL; first error ${failed[0].e.name} ${failed[0].e.code}; ep onError: ${epError?.code}`);
      assert.notEqual(client.ep.state, 'open');
      await assert.rejects(client.ep.get(lr, 0, client.a, 0, 1), ucx.EndpointClosedError);
    } finally {
      lr.unmap();
      client.worker.close();
      server.proc.kill('SIGKILL');
    }
  });
}
