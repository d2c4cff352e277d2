// Two-process transfers over one transport selection; each transport-*.test.mjs calls this once, so each
// selection runs in a process of its own (node --test runs files in separate processes).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomFillSync } from 'node:crypto';
import { ucx, sha, startServer, connectClient, closeClientAndServer } from './helpers.mjs';

export const MiB = 1 << 20;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * name: the selection's label; tls: UCX_TLS for both sides (undefined: UCX's default selection);
 * copts: connectClient options. 'worker-address' = GET/PUT on a second endpoint created from the
 * server's worker address (the sockaddr endpoint carries the tag messages). errorHandling 'none' is what
 * lets UCX 1.13 pick shared memory / cma; 'peer' keeps it on tcp (see README).
 */
export function transportSuite(name, tls, copts) {
  describe(`two processes over ${name}`, () => {
    let server, client;
    before(async () => {
      server = await startServer(256 * MiB, 64 * MiB, tls);
      client = await connectClient(server.port, tls, copts);
    });
    after(async () => {
      await closeClientAndServer(client, server);
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
        for (const [size, srcOff, dstOff] of [
          [1, 0, 0],
          [1, 12345, 3],
          [7, 1, 5],
          [4096, 4096, 0],
          [65537, 999, 17],
          [MiB + 3, 5 * MiB + 1, 1],
          [16 * MiB, 7, 64],
          [64 * MiB, 0, 0],
          [256 * MiB, 0, 64],
        ]) {
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
      for (const [size, srcOff, dstOff] of [
        [1, 0, 0],
        [13, 3, 5],
        [4097, 100, 4095],
        [MiB, 0, MiB + 1],
        [64 * MiB, 0, 0],
      ]) {
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

  // errorHandling 'none': UCX reports nothing on the RMA ep; connectRma ties it to the control ep, whose
  // failure (keepalive / tcp reset) fails the RMA ep and rejects its GETs (README "Peer failure with
  // errorHandling 'none'"). The GETs here come from the server's map(Buffer) region, which a 'none' ep
  // reads through the server's worker (AM over shm), so they cannot complete once it is dead.
  test(`SIGKILL of the server mid-GET rejects within a bounded time (${name})`, async () => {
    const BOUND_MS = 5000;
    const server = await startServer(256 * MiB, 1, tls);
    const client = await connectClient(server.port, tls, copts);
    const local = Buffer.alloc(256 * MiB);
    const lr = client.worker.map(local);
    let epError = null;
    client.ep.onError((e) => {
      epError = e;
    });
    try {
      await client.ep.get(lr, 0, client.a, 0, 256 * MiB, { timeoutMs: 60000 }); // warm-up, succeeds
      // Keep large GETs in flight and kill the server while they run.
      const started = Date.now();
      let killedAt = 0;
      const results = [];
      const inflight = [];
      for (let i = 0; i < 8; i++) {
        inflight.push(
          client.ep.get(lr, 0, client.a, 0, 256 * MiB, { timeoutMs: 60000 }).then(
            () => results.push({ ok: true, at: Date.now() }),
            (e) => results.push({ ok: false, e, at: Date.now() }),
          ),
        );
      }
      setTimeout(() => {
        killedAt = Date.now();
        server.proc.kill('SIGKILL');
      }, 5);
      await Promise.all(inflight);
      const failed = results.filter((r) => !r.ok);
      assert.ok(failed.length > 0, `no GET failed (${results.length} completed, killed ${killedAt - started} ms after start)`);
      for (const f of failed) {
        assert.ok(f.e instanceof ucx.PeerUnreachableError || f.e instanceof ucx.EndpointClosedError, `unexpected ${f.e?.name}: ${f.e?.message}`);
        assert.ok(f.at - killedAt < BOUND_MS, `rejected ${f.at - killedAt} ms after SIGKILL (bound ${BOUND_MS} ms)`);
      }
      const worst = Math.max(...failed.map((f) => f.at - killedAt));
      console.log(
        `# ${name}: ${failed.length}/8 GETs rejected, worst ${worst} ms after SIGKILL; first error ${failed[0].e.name} ${failed[0].e.code}; ep onError: ${epError?.code}`,
      );
      if (copts.errorHandling === 'none') {
        // Failed through the control ep: a peer failure, reported on the RMA ep as well.
        for (const f of failed) assert.ok(f.e instanceof ucx.PeerUnreachableError, `${f.e.name}: ${f.e.message}`);
        assert.ok(epError instanceof ucx.PeerUnreachableError, 'onError of the RMA ep did not fire');
      }
      assert.notEqual(client.ep.state, 'open');
      await assert.rejects(client.ep.get(lr, 0, client.a, 0, 1), ucx.EndpointClosedError);
      // Once the endpoint is closed nothing is left that needs progress: requests UCX never completes
      // ('none') are orphans and do not keep the process alive.
      for (let i = 0; i < 100 && client.ep.state !== 'closed'; i++) await sleep(10);
      assert.equal(client.ep.state, 'closed');
      const st = client.worker.stats();
      assert.equal(st.pendingOps, st.orphanedOps, JSON.stringify(st));
    } finally {
      lr.unmap();
      client.worker.close();
      server.proc.kill('SIGKILL');
    }
  });
}
