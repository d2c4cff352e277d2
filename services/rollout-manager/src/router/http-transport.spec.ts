import { Agent, createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { readAll, send } from './http-transport';

describe('the router’s requests to engines', () => {
  let server: Server;
  let url: string;
  const agent = new Agent({ keepAlive: true });
  let served = 0;

  beforeAll(async () => {
    // An engine that, like uvicorn at its keep-alive timeout, closes an idle connection as the next request
    // arrives on it: the first request of a connection is answered, a later one gets the socket reset.
    server = createServer((req, res) => {
      const socket = req.socket as typeof req.socket & { requests?: number };
      socket.requests = (socket.requests ?? 0) + 1;
      if (socket.requests > 1) return socket.destroy();
      served += 1;
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/completions`;
  });
  afterAll(async () => {
    agent.destroy();
    await new Promise((done) => server.close(done));
  });

  it('sends a request that failed on a stale pooled socket again, once, on a new connection', async () => {
    const options = { agent, idleTimeoutMs: 2_000 };
    const first = await send(url, 'POST', '{"prompt":"a"}', options);
    expect((await readAll(first)).toString()).toBe('{"ok":true}');
    // The pooled socket is reused and reset: answered anyway, from a fresh connection.
    const second = await send(url, 'POST', '{"prompt":"b"}', options);
    expect(second.statusCode).toBe(200);
    expect((await readAll(second)).toString()).toBe('{"ok":true}');
    expect(served).toBe(2);
  });

  it('does not send again when the engine is gone: a refused connection is the engine’s failure', async () => {
    const gone = createServer();
    await new Promise<void>((done) => gone.listen(0, '127.0.0.1', done));
    const port = (gone.address() as AddressInfo).port;
    await new Promise((done) => gone.close(done));
    await expect(send(`http://127.0.0.1:${port}/v1/completions`, 'POST', '{}', { agent, idleTimeoutMs: 2_000 })).rejects.toMatchObject({
      code: 'ECONNREFUSED',
    });
  });
});
