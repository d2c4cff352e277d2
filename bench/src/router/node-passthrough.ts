/**
 * The floor of any router written on Node's HTTP stack, for bench:router: a proxy that does nothing but
 * pass requests round robin to the engines over keep-alive connections and pipe the answers back,
 * bytes untouched — no parsing, no routing rule, no recording, no failover. What it reaches against the
 * Rust gateways bounds what a Node router can (docs/benchmarks.md "The router on every request").
 *
 *   node bench/dist/router/node-passthrough.js --engines URL[,URL...] [--port P]
 *
 * Prints `{"port":P}` on stdout once it listens.
 */
import { Agent, createServer, request } from 'node:http';

function argument(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const engines = (argument('engines') ?? '')
  .split(',')
  .filter(Boolean)
  .map((u) => new URL(u));
if (engines.length === 0) {
  process.stderr.write('node-passthrough: --engines URL[,URL...] is required\n');
  process.exit(2);
}
const agent = new Agent({ keepAlive: true, maxSockets: Infinity, scheduling: 'lifo' });
let next = 0;

const server = createServer((req, res) => {
  const engine = engines[next++ % engines.length];
  const upstream = request({ host: engine.hostname, port: engine.port, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  upstream.on('error', (err) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `engine unreachable: ${err.message}`, code: 502 } }));
  });
  req.pipe(upstream);
});
server.keepAliveTimeout = 60_000;
server.listen(Number(argument('port') ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
