import { Logger } from '@nestjs/common';
import { Endpoint, Listener, MemoryRegion, UcxWorker } from '@robustrl/ucx';

/** Tag of catalog messages: a weight server tells each connected puller which versions it holds where. */
export const CATALOG_TAG = 0x5257_0000_0000_0001n; // "RW" + 1
const CATALOG_MAX_BYTES = 1 << 20;

/** One region a server offers: a version's contiguous buffer (see bucket-layout), its address and packed key. */
export interface CatalogEntry {
  version: number;
  address: string; // 0x-hex
  length: number;
  rkey: string; // base64
}
export interface Catalog {
  /** The server's advertised address (`host:port`), so a puller connected to several servers can tell them apart. */
  from: string;
  entries: CatalogEntry[];
}

export function catalogEntry(version: number, region: MemoryRegion): CatalogEntry {
  const d = region.descriptor();
  return { version, address: `0x${d.address.toString(16)}`, length: d.length, rkey: d.rkey.toString('base64') };
}

/**
 * The agent's UCX weight server (paper §5.2.1 ➀/➂): a listener whose accepted endpoints receive the
 * catalog of versions this machine serves — the trainer's published versions, or a rollout's copies
 * (from the first pulled bucket on: the registry only assigns buckets the source holds, which is how a
 * relay serves bucket k while it still pulls k+1). Pullers then GET one-sided; the server's CPU does
 * nothing per transfer. The catalog is pushed again to every endpoint whenever it changes.
 */
export class WeightServer {
  private readonly logger = new Logger('weight-server');
  private readonly endpoints = new Set<Endpoint>();
  private readonly offered = new Map<number, { region: MemoryRegion; entry: CatalogEntry }>();
  private listener?: Listener;
  advertisedAddress = '';

  constructor(private readonly worker: UcxWorker) {}

  listen(bindHost: string, port: number, advertiseHost: string): string {
    this.listener = this.worker.listen({ host: bindHost, port }, (ep) => this.onConnection(ep));
    this.advertisedAddress = `${advertiseHost}:${this.listener.port}`;
    return this.advertisedAddress;
  }

  /** Serve `region` as `version` (replacing an earlier region of that version) and tell every puller. */
  offer(version: number, region: MemoryRegion): CatalogEntry {
    const entry = catalogEntry(version, region);
    this.offered.set(version, { region, entry });
    this.broadcast();
    return entry;
  }

  /**
   * Stop serving versions. Pullers may hold the old remote key and be mid-GET, so with `disconnect`
   * every endpoint is closed first (their GETs fail at once, they report the source lost); the caller
   * unmaps the memory only after that (never while a remote GET could still read it).
   */
  async withdraw(versions: number[], opts: { disconnect: boolean }): Promise<void> {
    let changed = false;
    for (const v of versions) changed = this.offered.delete(v) || changed;
    if (!changed) return;
    if (opts.disconnect) {
      const eps = [...this.endpoints];
      this.endpoints.clear();
      await Promise.all(eps.map((ep) => ep.close({ force: true }).catch(() => undefined)));
    } else {
      this.broadcast();
    }
  }

  catalog(): Catalog {
    return { from: this.advertisedAddress, entries: [...this.offered.values()].map((o) => o.entry).sort((a, b) => a.version - b.version) };
  }

  close(): void {
    this.listener?.close();
    this.endpoints.clear();
  }

  private onConnection(ep: Endpoint): void {
    this.endpoints.add(ep);
    ep.onError(() => this.endpoints.delete(ep));
    this.send(ep, this.catalog());
  }

  private broadcast(): void {
    const catalog = this.catalog();
    for (const ep of this.endpoints) this.send(ep, catalog);
  }

  private send(ep: Endpoint, catalog: Catalog): void {
    const bytes = Buffer.from(JSON.stringify(catalog));
    if (bytes.length > CATALOG_MAX_BYTES) throw new Error(`catalog of ${bytes.length} bytes exceeds ${CATALOG_MAX_BYTES}`);
    ep.sendTag(CATALOG_TAG, bytes, { timeoutMs: 10_000 }).catch((err: unknown) => {
      // A puller that went away: forget its endpoint; it reconnects if it still wants weights.
      this.endpoints.delete(ep);
      this.logger.debug(`catalog not delivered: ${err instanceof Error ? err.message : String(err)}`);
    });
  }
}

export { CATALOG_MAX_BYTES };
