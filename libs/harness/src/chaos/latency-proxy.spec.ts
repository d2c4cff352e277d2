import { createServer, createConnection, Server, Socket } from 'node:net';
import { LatencyProxy } from './latency-proxy';

/** The relay the slow-postgres fault slows (degraded-faults.ts), in front of an echo server. */
describe('latency proxy', () => {
  let echo: Server;
  let proxy: LatencyProxy;
  const clients: Socket[] = [];

  beforeAll(async () => {
    echo = createServer((s) => s.pipe(s));
    await new Promise<void>((ready) => echo.listen(0, '127.0.0.1', () => ready()));
    proxy = new LatencyProxy({ host: '127.0.0.1', port: (echo.address() as { port: number }).port });
    await proxy.listen();
  });
  afterAll(async () => {
    for (const c of clients) c.destroy();
    await proxy.close();
    await new Promise<void>((done) => echo.close(() => done()));
  });

  /** Sends `messages` one after another and resolves with what came back, and how long the whole took. */
  async function roundTrip(messages: string[]): Promise<{ text: string; ms: number }> {
    const client = createConnection({ host: '127.0.0.1', port: proxy.port });
    clients.push(client);
    await new Promise<void>((ready) => client.once('connect', () => ready()));
    const expected = messages.join('').length;
    const started = Date.now();
    let text = '';
    const done = new Promise<void>((finish) =>
      client.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        if (text.length >= expected) finish();
      }),
    );
    for (const m of messages) client.write(m);
    await done;
    return { text, ms: Date.now() - started };
  }

  it('passes bytes through in order, held the latency set each way while slow, and at once again when healed', async () => {
    expect((await roundTrip(['a', 'b'])).text).toBe('ab');
    proxy.slow(150);
    const slow = await roundTrip(['one ', 'two ', 'three']);
    expect(slow.text).toBe('one two three');
    // Held on the way in and on the way back: at least twice the latency.
    expect(slow.ms).toBeGreaterThanOrEqual(300);
    proxy.slow(0);
    expect((await roundTrip(['x', 'y', 'z'])).text).toBe('xyz');
    expect(() => proxy.slow(-1)).toThrow(/≥ 0/);
  });
});
