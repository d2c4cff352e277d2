import { createServer, Server } from 'node:http';
import { AddressInfo, connect } from 'node:net';
import { DEFAULT_SERVER_LIMITS, limitServer } from './http-server-limits';

describe('limitServer: how long a listener waits on a caller', () => {
  let server: Server;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  it('sets the defaults, or what it is given', () => {
    server = limitServer(createServer());
    expect([server.headersTimeout, server.requestTimeout, server.keepAliveTimeout]).toEqual([
      DEFAULT_SERVER_LIMITS.headersTimeoutMs,
      DEFAULT_SERVER_LIMITS.requestTimeoutMs,
      DEFAULT_SERVER_LIMITS.keepAliveTimeoutMs,
    ]);
    expect(limitServer(createServer(), { headersTimeoutMs: 1_000 }).headersTimeout).toBe(1_000);
  });

  it('cuts a caller that trickles its headers (a socket held open byte by byte), and answers one that does not', async () => {
    // Node checks its timeouts every connectionsCheckingInterval (30 s by default): short here.
    server = limitServer(
      createServer({ connectionsCheckingInterval: 50 }, (_req, res) => res.end('ok')),
      { headersTimeoutMs: 300, requestTimeoutMs: 600 },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const { port } = server.address() as AddressInfo;
    const slow = connect(port, '127.0.0.1');
    let answer = '';
    slow.on('data', (b) => (answer += b.toString()));
    const closed = new Promise<number>((resolve) => slow.on('close', () => resolve(Date.now())));
    const started = Date.now();
    slow.write('GET / HTTP/1.1\r\nHost: x\r\n');
    const trickle = setInterval(() => slow.writable && slow.write('X-Slow: 1\r\n'), 100);
    const at = await closed;
    clearInterval(trickle);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(at - started).toBeLessThan(3_000);
    expect(await (await fetch(`http://127.0.0.1:${port}/`)).text()).toBe('ok');
  });
});
