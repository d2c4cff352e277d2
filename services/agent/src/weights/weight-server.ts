import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { Endpoint, EndpointClosedError, Listener, MemoryRegion, MemoryType, UcxWorker } from '@robustrl/ucx';

/** Tags of the catalog protocol ("RW" + n): a server's hello on each connection, a puller's request, the server's answer. */
export const CATALOG_TAG = 0x5257_0000_0000_0001n;
export const HELLO_TAG = 0x5257_0000_0000_0002n;
export const CATALOG_REQUEST_TAG = 0x5257_0000_0000_0003n;
const CATALOG_MAX_BYTES = 1 << 20;
const REQUEST_MAX_BYTES = 4 * 1024;

/**
 * Where a server holds one shard of a version: for each bucket, its address, length and memory, and
 * which of the entry's packed keys reaches it. A shard from `/dev/shm` is one region (every bucket names
 * the same key, at its offset in the layout); a shard in device memory is one region per bucket (CUDA IPC).
 */
export interface CatalogEntry {
  version: number;
  /** Absent for shard 0 (a version of one shard reads as it always did). */
  shard?: number;
  /** The packed remote keys of the version's regions (base64), once each. */
  rkeys: string[];
  buckets: CatalogBucket[];
}
export interface CatalogBucket {
  index: number;
  address: string; // 0x-hex
  length: number;
  /** Index into the entry's rkeys. */
  rkey: number;
  memoryType: MemoryType;
}
/** Where one bucket of a held version lies: a registered region and the bucket's offset in it. */
export interface BucketPlace {
  index: number;
  region: MemoryRegion;
  offset: number;
  sizeBytes: number;
}
export interface Catalog {
  /** The server's advertised address (`host:port`), so a puller connected to several servers can tell them apart. */
  from: string;
  entries: CatalogEntry[];
  /** A request the server turned down, and why (the puller fails that pull at once, naming it). */
  refused?: { version: number; shard?: number; reason: string };
}
/** Sent on each accepted connection: the nonce its requests must carry, so an answer goes back on that connection only. */
export interface Hello {
  from: string;
  nonce: string;
}
/**
 * What a puller asks for: the region of one shard of a version (absent: shard 0), for one pull the
 * registry assigned (with identity on, its grant's token).
 */
export interface CatalogRequest {
  nonce: string;
  pullId: string;
  pullerId: string;
  version: number;
  shard?: number;
  token?: string;
}

/**
 * Who may have a shard's region: a pull the registry assigned to this source, for that puller, version
 * and shard (serving-grants.ts keeps the assignments the weights topic carried). Null when granted, else why not.
 */
export type CatalogGrants = (request: Omit<CatalogRequest, 'nonce'>) => Promise<string | null>;

/** A served shard: the catalog's key for it. */
export const offerKey = (version: number, shard = 0) => `${version}/${shard}`;

export function catalogEntry(version: number, shard: number, places: readonly BucketPlace[]): CatalogEntry {
  const rkeys: string[] = [];
  const keyOf = new Map<MemoryRegion, number>();
  const buckets = places.map((p) => {
    let k = keyOf.get(p.region);
    if (k === undefined) {
      keyOf.set(p.region, (k = rkeys.length));
      rkeys.push(p.region.packRkey().toString('base64'));
    }
    return {
      index: p.index,
      address: `0x${(p.region.address + BigInt(p.offset)).toString(16)}`,
      length: p.sizeBytes,
      rkey: k,
      memoryType: p.region.memoryType,
    };
  });
  return { version, ...(shard !== 0 ? { shard } : {}), rkeys, buckets };
}

/**
 * The agent's UCX weight server (paper §5.2.1 ➀/➂): a listener for pullers, which then GET one-sided;
 * the server's CPU does nothing per transfer.
 *
 * A region's address and remote key are a capability to read this machine's memory, so they go only
 * to pullers the registry assigned: a connection gets a hello with a nonce of its own; a request
 * carrying that nonce and naming an assigned pull (id, puller, version, shard) is answered, on that
 * connection only, with that shard's entry — once this machine serves it (a relay serves from its
 * first pulled bucket on: the registry only assigns buckets the source holds). The entries a connection
 * was granted are sent again whenever they change. Nothing is sent to a connection that asks for nothing.
 * A machine serves every shard it holds (its trainer ranks' publications, a relay's pulled shards).
 */
export class WeightServer {
  private readonly logger = new Logger('weight-server');
  /** Open connections by their hello's nonce, and the shards (`offerKey`) each was granted. */
  private readonly connections = new Map<string, { ep: Endpoint; granted: Set<string> }>();
  private readonly offered = new Map<string, CatalogEntry>();
  private listener?: Listener;
  private closed = false;
  advertisedAddress = '';

  constructor(
    private readonly worker: UcxWorker,
    private readonly grants: CatalogGrants,
  ) {}

  listen(bindHost: string, port: number, advertiseHost: string): string {
    this.listener = this.worker.listen({ host: bindHost, port }, (ep) => this.onConnection(ep));
    this.advertisedAddress = `${advertiseHost}:${this.listener.port}`;
    void this.receiveRequests();
    return this.advertisedAddress;
  }

  /** Serve a shard of `version` from where its buckets lie (replacing an earlier offer of it) and tell the pullers granted it. */
  offer(version: number, shard: number, places: readonly BucketPlace[]): CatalogEntry {
    const entry = catalogEntry(version, shard, places);
    this.offered.set(offerKey(version, shard), entry);
    this.broadcast();
    return entry;
  }

  /**
   * Stop serving shards. Pullers may hold the old remote key and be mid-GET, so with `disconnect`
   * every endpoint is closed first (their GETs fail at once, they report the source lost); the caller
   * unmaps the memory only after that (never while a remote GET could still read it).
   */
  async withdraw(shards: ReadonlyArray<{ version: number; shard: number }>, opts: { disconnect: boolean }): Promise<void> {
    let changed = false;
    for (const s of shards) changed = this.offered.delete(offerKey(s.version, s.shard)) || changed;
    if (!changed) return;
    if (opts.disconnect) {
      const eps = [...this.connections.values()].map((c) => c.ep);
      this.connections.clear();
      await Promise.all(eps.map((ep) => ep.close({ force: true }).catch(() => undefined)));
    } else {
      this.broadcast();
    }
  }

  close(): void {
    this.closed = true;
    this.listener?.close();
    this.connections.clear();
  }

  private onConnection(ep: Endpoint): void {
    const nonce = randomBytes(16).toString('hex');
    this.connections.set(nonce, { ep, granted: new Set() });
    ep.onError(() => this.connections.delete(nonce));
    const hello: Hello = { from: this.advertisedAddress, nonce };
    this.send(nonce, HELLO_TAG, hello);
  }

  private async receiveRequests(): Promise<void> {
    while (!this.closed) {
      let request: CatalogRequest;
      try {
        const m = await this.worker.recvTag(CATALOG_REQUEST_TAG, { maxLength: REQUEST_MAX_BYTES });
        request = JSON.parse(m.data.toString('utf8')) as CatalogRequest;
        if (
          typeof request.nonce !== 'string' ||
          typeof request.pullId !== 'string' ||
          typeof request.pullerId !== 'string' ||
          !Number.isInteger(request.version) ||
          (request.shard !== undefined && !(Number.isInteger(request.shard) && request.shard >= 0)) ||
          (request.token !== undefined && typeof request.token !== 'string')
        )
          throw new Error('malformed catalog request');
      } catch (err) {
        if (this.closed || err instanceof EndpointClosedError) return;
        this.logger.warn(`ignoring a catalog request: ${err instanceof Error ? err.message : String(err)}`);
        continue;
      }
      void this.answer(request);
    }
  }

  private async answer(request: CatalogRequest): Promise<void> {
    const connection = this.connections.get(request.nonce);
    // Not a nonce this server handed out on an open connection: there is nowhere to answer.
    if (!connection) return void this.logger.warn(`catalog request for pull ${request.pullId} with an unknown nonce: ignored`);
    const { nonce, ...asked } = request;
    const refusal = await this.grants(asked);
    if (refusal !== null) {
      this.logger.warn(`catalog refused to ${request.pullerId} for pull ${request.pullId}: ${refusal}`);
      const shard = request.shard ? { shard: request.shard } : {};
      return this.send(nonce, CATALOG_TAG, { from: this.advertisedAddress, entries: [], refused: { version: request.version, ...shard, reason: refusal } });
    }
    connection.granted.add(offerKey(request.version, request.shard));
    this.sendGranted(nonce);
  }

  private broadcast(): void {
    for (const [nonce, c] of this.connections) if (c.granted.size > 0) this.sendGranted(nonce);
  }

  private sendGranted(nonce: string): void {
    const c = this.connections.get(nonce);
    if (!c) return;
    const entries = [...this.offered.values()].filter((e) => c.granted.has(offerKey(e.version, e.shard)));
    this.send(nonce, CATALOG_TAG, { from: this.advertisedAddress, entries });
  }

  private send(nonce: string, tag: bigint, message: Catalog | Hello): void {
    const c = this.connections.get(nonce);
    if (!c) return;
    const bytes = Buffer.from(JSON.stringify(message));
    if (bytes.length > CATALOG_MAX_BYTES) throw new Error(`catalog of ${bytes.length} bytes exceeds ${CATALOG_MAX_BYTES}`);
    c.ep.sendTag(tag, bytes, { timeoutMs: 10_000 }).catch((err: unknown) => {
      // A puller that went away: forget its connection; it reconnects if it still wants weights.
      this.connections.delete(nonce);
      this.logger.debug(`catalog message not delivered: ${err instanceof Error ? err.message : String(err)}`);
    });
  }
}

export { CATALOG_MAX_BYTES };
