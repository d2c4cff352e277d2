import { Logger } from '@nestjs/common';
import { EndpointClosedError, Endpoint, MemoryType, RemoteKey, RemoteRegion, UcxWorker } from '@robustrl/ucx';
import { describeShard } from './held-copies';
import { Catalog, CATALOG_MAX_BYTES, CATALOG_REQUEST_TAG, CATALOG_TAG, CatalogEntry, CatalogRequest, Hello, HELLO_TAG, offerKey } from './weight-server';
import { RobustrlError } from '@robustrl/bus';

/** Where a source holds one bucket of a version's shard, usable for GETs: the endpoint, and the bucket's span with its key unpacked on it. */
export interface SourceRegion {
  ep: Endpoint;
  remote: RemoteRegion;
  memoryType: MemoryType;
}

export class SourceNotServingError extends RobustrlError {}

/** What a puller asks a source's region with: the assigned pull, and with identity on its grant's token. */
export interface PullCredentials {
  pullId: string;
  pullerId: string;
  token?: string;
}

/**
 * The puller's side of the weight servers: one UCX endpoint per source address (connected on first use,
 * peer error handling on, so a source that dies fails its GETs instead of hanging them), the hello each
 * source sent on it, the catalog entries it granted (weight-server.ts: asked for per assigned pull), and
 * remote keys unpacked per endpoint.
 */
export class SourceLinks {
  private readonly logger = new Logger('source-links');
  private readonly endpoints = new Map<string, Promise<Endpoint>>();
  private readonly catalogs = new Map<string, Catalog>();
  /** Per source address: the nonce of its hello on our connection, the shards (`offerKey`) asked for, the refusals. */
  private readonly hellos = new Map<string, string>();
  private readonly requested = new Map<string, Set<string>>();
  private readonly refusals = new Map<string, Map<string, string>>();
  private readonly waiters = new Set<() => void>();
  private readonly rkeys = new WeakMap<Endpoint, Map<string, RemoteKey>>();
  private closed = false;

  constructor(
    private readonly worker: UcxWorker,
    private readonly connectTimeoutMs: number,
  ) {}

  /** Starts receiving catalogs (one receive posted at a time; UCX queues what arrives in between). */
  start(): void {
    void this.receiveCatalogs();
    void this.receiveHellos();
  }

  close(): void {
    this.closed = true;
    for (const w of this.waiters) w();
  }

  async endpointTo(address: string): Promise<Endpoint> {
    let ep = this.endpoints.get(address);
    if (!ep) {
      const { host, port } = parseAddress(address);
      ep = this.worker.connect(host, port, { timeoutMs: this.connectTimeoutMs }).then((e) => {
        e.onError(() => this.forget(address));
        return e;
      });
      this.endpoints.set(address, ep);
      ep.catch(() => this.forget(address));
    }
    return ep;
  }

  /** Closes the link to a source (after it failed a pull), so the next pull from it reconnects. */
  forget(address: string): void {
    const ep = this.endpoints.get(address);
    this.endpoints.delete(address);
    this.catalogs.delete(address);
    this.hellos.delete(address);
    this.requested.delete(address);
    this.refusals.delete(address);
    ep?.then(async (e) => {
      if (e.state === 'open') await e.close({ force: true });
    }).catch(() => undefined);
  }

  /**
   * Where bucket `bucketIndex` of shard `shard` of `version` lies on the source at `address`, asked of
   * the source for the assigned pull `pull` (with its grant's token, identity on) and taken from the
   * catalog entry it grants, waiting up to `waitMs` for its hello and its answer. Once granted on a
   * connection, a shard's entry serves every later pull of it from that source on it.
   */
  async regionOf(address: string, version: number, shard: number, bucketIndex: number, waitMs: number, pull: PullCredentials): Promise<SourceRegion> {
    const ep = await this.endpointTo(address);
    const deadline = Date.now() + waitMs;
    const key = offerKey(version, shard);
    const what = describeShard(version, shard);
    let d: CatalogEntry | undefined;
    for (;;) {
      d = this.catalogs.get(address)?.entries.find((e) => e.version === version && (e.shard ?? 0) === shard);
      if (d) break;
      const refused = this.refusals.get(address)?.get(key);
      if (refused) throw new SourceNotServingError(`${address} refused its region of ${what}: ${refused}`);
      this.ask(ep, address, version, shard, pull);
      if (this.closed) throw new EndpointClosedError('agent is shutting down');
      if (ep.state !== 'open') throw new EndpointClosedError(`link to ${address} ${ep.state}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new SourceNotServingError(`${address} does not serve ${what} (no catalog entry within ${waitMs} ms)`);
      await this.nextCatalog(Math.min(left, 250));
    }
    const bucket = d.buckets.find((b) => b.index === bucketIndex);
    const packed = bucket ? d.rkeys[bucket.rkey] : undefined;
    if (!bucket || packed === undefined) throw new SourceNotServingError(`${address} serves ${what} without its bucket ${bucketIndex}`);
    // One unpacked key per packed key and endpoint: a /dev/shm version's buckets share one.
    let keys = this.rkeys.get(ep);
    if (!keys) this.rkeys.set(ep, (keys = new Map()));
    let rkey = keys.get(packed);
    if (!rkey) keys.set(packed, (rkey = ep.unpackRkey(Buffer.from(packed, 'base64'))));
    return { ep, remote: { address: BigInt(bucket.address), length: bucket.length, rkey }, memoryType: bucket.memoryType };
  }

  private nextCatalog(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.waiters.add(done);
    });
  }

  /** Asks the source for a shard's region once per connection, as soon as its hello (the nonce) is there. */
  private ask(ep: Endpoint, address: string, version: number, shard: number, pull: PullCredentials): void {
    const nonce = this.hellos.get(address);
    if (!nonce) return;
    let asked = this.requested.get(address);
    if (!asked) this.requested.set(address, (asked = new Set()));
    const key = offerKey(version, shard);
    if (asked.has(key)) return;
    asked.add(key);
    const request: CatalogRequest = {
      nonce,
      pullId: pull.pullId,
      pullerId: pull.pullerId,
      version,
      ...(shard !== 0 ? { shard } : {}),
      ...(pull.token ? { token: pull.token } : {}),
    };
    ep.sendTag(CATALOG_REQUEST_TAG, Buffer.from(JSON.stringify(request)), { timeoutMs: 10_000 }).catch((err: unknown) => {
      asked.delete(key);
      this.logger.warn(`catalog request to ${address} not delivered: ${err instanceof Error ? err.message : String(err)}`);
    });
  }

  private async receiveHellos(): Promise<void> {
    while (!this.closed) {
      try {
        const m = await this.worker.recvTag(HELLO_TAG, { maxLength: 4 * 1024 });
        const hello = JSON.parse(m.data.toString('utf8')) as Hello;
        if (typeof hello.from !== 'string' || typeof hello.nonce !== 'string') throw new Error('malformed hello');
        if (this.endpoints.has(hello.from)) this.hellos.set(hello.from, hello.nonce);
        for (const w of [...this.waiters]) w();
      } catch (err) {
        if (this.closed || err instanceof EndpointClosedError) return;
        this.logger.warn(`ignoring a hello: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  }

  private async receiveCatalogs(): Promise<void> {
    while (!this.closed) {
      try {
        const m = await this.worker.recvTag(CATALOG_TAG, { maxLength: CATALOG_MAX_BYTES });
        const catalog = JSON.parse(m.data.toString('utf8')) as Catalog;
        if (typeof catalog.from !== 'string' || !Array.isArray(catalog.entries)) throw new Error('malformed catalog');
        // Only sources we are linked to: a catalog from a link we already dropped is stale.
        if (this.endpoints.has(catalog.from)) {
          if (catalog.refused) {
            let refused = this.refusals.get(catalog.from);
            if (!refused) this.refusals.set(catalog.from, (refused = new Map()));
            refused.set(offerKey(catalog.refused.version, catalog.refused.shard), catalog.refused.reason);
          } else this.catalogs.set(catalog.from, catalog);
        }
        for (const w of [...this.waiters]) w();
      } catch (err) {
        if (this.closed || err instanceof EndpointClosedError) return;
        this.logger.warn(`ignoring a catalog message: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  }
}

export function parseAddress(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  const port = Number(address.slice(i + 1));
  if (i <= 0 || !Number.isInteger(port) || port <= 0 || port > 65535) throw new Error(`not a weight server address (host:port): ${address}`);
  return { host: address.slice(0, i), port };
}
