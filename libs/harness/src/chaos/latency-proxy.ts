import { createConnection, createServer, Server, Socket } from 'node:net';

/**
 * A TCP relay in front of a server (the campaign's PostgreSQL) that can be made slow: every chunk in
 * either direction is held for the latency set now, in order, so a query costs its round trips times
 * twice the latency — a slow disk or a congested link, not a dead server. Connections made while it
 * is slow stay open when it heals; the ones in flight keep their order.
 *
 * What stays simulated: the latency is per chunk as the relay reads it, not per packet, and the
 * relay itself runs in the campaign's process (one kernel, one clock: docs/contributors/chaos.md).
 */
export class LatencyProxy {
  private server?: Server;
  private latencyMs = 0;
  private readonly sockets = new Set<Socket>();
  /** The port it listens on (127.0.0.1), once listening. */
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  async listen(): Promise<number> {
    this.server = createServer((client) => this.relay(client));
    await new Promise<void>((ready, failed) => {
      this.server!.once('error', failed);
      this.server!.listen(0, '127.0.0.1', () => ready());
    });
    this.port = (this.server.address() as { port: number }).port;
    return this.port;
  }

  /** Hold every chunk for `ms` from now on (0: pass them at once). */
  slow(ms: number): void {
    if (!(ms >= 0)) throw new RangeError(`latency must be ≥ 0 ms, got ${ms}`);
    this.latencyMs = ms;
  }

  get latency(): number {
    return this.latencyMs;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((done) => (this.server ? this.server.close(() => done()) : done()));
  }

  private relay(client: Socket): void {
    const upstream = createConnection(this.target);
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.setNoDelay(true);
      s.on('close', () => this.sockets.delete(s));
      // Either side gone: so is the other (the server restarted, a client gave up).
      s.on('error', () => undefined);
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    this.pipe(client, upstream);
    this.pipe(upstream, client);
  }

  /** `from` → `to`, each chunk due `latency` after it arrived and never before the one ahead of it. */
  private pipe(from: Socket, to: Socket): void {
    let lastDue = 0;
    from.on('data', (chunk: Buffer) => {
      if (this.latencyMs === 0 && lastDue <= Date.now()) {
        to.write(chunk);
        return;
      }
      const due = Math.max(Date.now() + this.latencyMs, lastDue);
      lastDue = due;
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, due - Date.now());
    });
    from.on('end', () => {
      const wait = Math.max(0, lastDue - Date.now());
      setTimeout(() => to.end(), wait);
    });
  }
}
