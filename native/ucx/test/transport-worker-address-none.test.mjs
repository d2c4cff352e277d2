import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ucx, startServer, connectClient } from './helpers.mjs';
import { transportSuite, MiB, sleep } from './transport-suite.mjs';

transportSuite('worker-address ep, errorHandling none (shm/cma)', undefined, { rma: 'worker-address', errorHandling: 'none' });

test("force close of an errorHandling 'none' ep rejects its pending GETs (peer stopped, not dead)", async () => {
  // A stopped peer is not detected (no error handling on the ep; its tcp control ep stays up): a
  // force close (or timeoutMs) is what bounds the wait. GETs from the server's map(Buffer) region are
  // served by the server's worker, so they stall while it is stopped.
  const server = await startServer(16 * MiB, 1);
  const client = await connectClient(server.port, undefined, { rma: 'worker-address', errorHandling: 'none' });
  const lr = client.worker.map(Buffer.alloc(16 * MiB));
  try {
    await client.ep.get(lr, 0, client.a, 0, 16 * MiB, { timeoutMs: 10000 });
    server.proc.kill('SIGSTOP');
    const results = [];
    const ps = [0, 1, 2].map(() =>
      client.ep.get(lr, 0, client.a, 0, 16 * MiB).then(
        () => results.push('ok'),
        (e) => results.push(e),
      ),
    );
    await sleep(200);
    assert.equal(results.length, 0, 'GETs completed while the server was stopped');
    const t0 = Date.now();
    await client.ep.close({ force: true });
    await Promise.all(ps);
    assert.ok(Date.now() - t0 < 1000);
    for (const e of results) assert.ok(e instanceof ucx.EndpointClosedError, String(e));
    let st = client.worker.stats();
    assert.equal(st.pendingOps, st.orphanedOps, JSON.stringify(st)); // nothing keeps the process alive
    // The abandoned requests still target the local buffer: its unmap is deferred...
    lr.unmap();
    assert.equal(client.worker.stats().mappings, 1);
    // ...until the resumed server answers them; then the background close completes as well.
    server.proc.kill('SIGCONT');
    await client.request({ op: 'echo', data: '' });
    for (let i = 0; i < 100 && client.worker.stats().pendingOps > 0; i++) await sleep(20);
    st = client.worker.stats();
    assert.deepEqual([st.pendingOps, st.orphanedOps, st.mappings], [0, 0, 0], JSON.stringify(st));
  } finally {
    lr.unmap();
    client.worker.close();
    server.proc.kill('SIGKILL');
  }
});
