// Single-link GET throughput, 64 MiB per GET, client and server in two processes on loopback.
// Usage: [N=30] [ALLOC=1] [RMA=sockaddr,worker-address,worker-address:none] node bench/get-throughput.mjs [TLS ...]
//   TLS default: the UCX default selection, then tcp.
//   RMA: which endpoint carries the GETs — the sockaddr endpoint, or a second endpoint created from
//   the server's worker address with errorHandling 'peer' (default) or ':none'.
// Prints MiB/s (best / median over N iterations), the worst event-loop lag seen meanwhile, and the
// RMA lane of the endpoint (from ucp_ep_print_info).
import { startServer, connectClient } from '../test/helpers.mjs';
const MiB = 1 << 20,
  SIZE = 64 * MiB,
  N = Number(process.env.N ?? 30);
const tlsList = process.argv.length > 2 ? process.argv.slice(2) : ['', 'sm,self,tcp', 'posix,cma,self,tcp', 'tcp'];
const ALLOC = process.env.ALLOC === '1'; // both regions from worker.mapAlloc (UCX-allocated shm) instead of Buffers
const rmaList = (process.env.RMA ?? 'sockaddr,worker-address,worker-address:none').split(',');
for (const tls of tlsList) {
  for (const rmaMode of rmaList) {
    const [rma, errorHandling = 'peer'] = rmaMode.split(':');
    const server = await startServer(SIZE, 1, tls || undefined, { alloc: ALLOC });
    const c = await connectClient(server.port, tls || undefined, { rma, errorHandling });
    const lane = c.ep
      .printInfo()
      .split('\n')
      .filter((l) => /rma_bw#/.test(l))
      .map((l) => l.replace(/^#\s*/, '').replace(/\s+/g, ' '))
      .join('; ');
    const lr = ALLOC ? c.worker.mapAlloc(SIZE) : c.worker.map(Buffer.alloc(SIZE));
    for (let i = 0; i < 3; i++) await c.ep.get(lr, 0, c.a, 0, SIZE); // warm-up (page faults, wire-up)
    let maxLag = 0,
      last = performance.now();
    const iv = setInterval(() => {
      const now = performance.now();
      maxLag = Math.max(maxLag, now - last - 1);
      last = now;
    }, 1);
    const times = [];
    for (let i = 0; i < N; i++) {
      const t = performance.now();
      await c.ep.get(lr, 0, c.a, 0, SIZE);
      times.push(performance.now() - t);
    }
    clearInterval(iv);
    times.sort((x, y) => x - y);
    const mibs = (ms) => (SIZE / MiB / (ms / 1000)).toFixed(0);
    console.log(
      `addon GET 64MiB TLS=${tls || '(default)'} ep=${rmaMode}${ALLOC ? ' mapAlloc' : ''}: best ${mibs(times[0])} MiB/s, median ${mibs(times[N >> 1])} MiB/s, max event-loop lag ${maxLag.toFixed(1)} ms, wakeups ${c.worker.stats().wakeups}; rma lane: ${lane}`,
    );
    lr.unmap();
    await c.request({ op: 'bye' }).catch(() => {});
    if (c.ep !== c.ctl) await c.ep.close().catch(() => {});
    await c.ctl.close().catch(() => {});
    c.worker.close();
    server.proc.kill('SIGKILL');
  }
}
