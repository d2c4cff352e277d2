// Single-link GET throughput, 64 MiB per GET, client and server in two processes on loopback.
// Usage: node bench/get-throughput.mjs [TLS ...]   (default: the UCX default selection, then tcp)
// Prints MiB/s (best / median over N iterations) and the worst event-loop lag seen meanwhile.
import { startServer, connectClient } from '../test/helpers.mjs';
const MiB = 1 << 20, SIZE = 64 * MiB, N = Number(process.env.N ?? 30);
const tlsList = process.argv.length > 2 ? process.argv.slice(2) : ['', 'sm,self,tcp', 'posix,cma,self,tcp', 'tcp'];
for (const tls of tlsList) {
  const server = await startServer(SIZE, 1, tls || undefined);
  const c = await connectClient(server.port, tls || undefined);
  const local = Buffer.alloc(SIZE);
  const lr = c.worker.map(local);
  for (let i = 0; i < 3; i++) await c.ep.get(lr, 0, c.a, 0, SIZE); // warm-up (page faults, wire-up)
  let maxLag = 0, last = performance.now();
  const iv = setInterval(() => { const now = performance.now(); maxLag = Math.max(maxLag, now - last - 1); last = now; }, 1);
  const times = [];
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    await c.ep.get(lr, 0, c.a, 0, SIZE);
    times.push(performance.now() - t);
  }
  clearInterval(iv);
  times.sort((x, y) => x - y);
  const mibs = (ms) => (SIZE / MiB / (ms / 1000)).toFixed(0);
  console.log(`addon GET 64MiB TLS=${tls || '(default)'}: best ${mibs(times[0])} MiB/s, median ${mibs(times[N >> 1])} MiB/s, max event-loop lag ${maxLag.toFixed(1)} ms, wakeups ${c.worker.stats().wakeups}`);
  lr.unmap();
  await c.request({ op: 'bye' }).catch(() => {});
  await c.ep.close().catch(() => {});
  c.worker.close();
  server.proc.kill('SIGKILL');
}
