import { readdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { publicationDigest } from '@robustrl/contracts';
import { MemoryType } from '@robustrl/ucx';
import { BucketSpan, bucketLayout } from './bucket-layout';
import { describeShard, HeldCopy, isComplete, shardRefOf, ShardManifest } from './held-copies';
import { IpcBucket, mapIpcBuckets } from './ipc-buckets';
import { PlaneContext } from './plane-context';
import { BucketPlace } from './weight-server';

/** Device buffers a rollout framework registered to receive versions into, one per bucket (`targets`). */
interface PullTarget {
  name: string;
  places: BucketPlace[];
  /** The (version, shard) whose copy occupies it, or null when free. */
  holder: { version: number; shard: number } | null;
}

/** How long a region outlives its copy: a puller may still be finishing a GET with the old key. */
export const UNMAP_GRACE_MS = 10_000;
const safeName = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, '_');

/**
 * Where pulled shards go on a rollout (paper §5.2.1 ➁, ➂): a free pull target whose buckets fit the
 * shard (device memory the rollout framework gave), else a `/dev/shm` staging file per (version, shard),
 * each served from its first bucket on. Also where copies go: retired, replaced, dropped.
 */
export class PullStaging {
  private readonly targets = new Map<string, PullTarget>();

  constructor(private readonly ctx: PlaneContext) {}

  /**
   * A rollout framework hands over device buffers, one per bucket of the model's versions, to receive
   * versions into (double-buffering: register two). A shard is pulled into a free target whose bucket
   * sizes match its manifest, else into `/dev/shm` staging. A target is free again once its shard is
   * retired or dropped; registering a name again replaces it.
   */
  registerTarget(req: { name: string; buckets: IpcBucket[] }): { name: string; buckets: number; totalBytes: number; memoryType: MemoryType } {
    const { worker } = this.ctx.ready();
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(req.name)) throw new RangeError(`target name must be 1-64 of [A-Za-z0-9._-], got ${JSON.stringify(req.name)}`);
    if (req.buckets.length === 0) throw new RangeError('a target needs at least one bucket');
    const { buckets, totalBytes } = bucketLayout(req.buckets.map((b) => b.sizeBytes));
    // Written by this agent's own GETs (local access); relays serve from it, so peers only read it.
    const regions = mapIpcBuckets(worker, req.buckets, 'remote-read');
    this.removeTarget(req.name);
    this.targets.set(req.name, {
      name: req.name,
      places: buckets.map((b, i) => ({ index: b.index, region: regions[i], offset: 0, sizeBytes: b.sizeBytes })),
      holder: null,
    });
    const memoryType = regions.find((r) => r.memoryType !== 'host')?.memoryType ?? 'host';
    this.ctx.logger.log(`pull target ${req.name}: ${buckets.length} buckets, ${totalBytes} bytes of ${memoryType} memory`);
    return { name: req.name, buckets: buckets.length, totalBytes, memoryType };
  }

  /** The framework takes its buffers back: a shard held there is dropped (no longer served), then they are unmapped. */
  removeTarget(name: string): boolean {
    const t = this.targets.get(name);
    if (!t) return false;
    this.targets.delete(name);
    const copy = this.occupant(t);
    if (copy) {
      this.ctx.copies.delete(copy);
      void this.ctx.server()?.withdraw([copy], { disconnect: true });
    }
    const regions = new Set(t.places.map((p) => p.region));
    const unmap = () => regions.forEach((r) => r.unmap());
    if (this.ctx.stopping()) unmap();
    else setTimeout(unmap, UNMAP_GRACE_MS).unref();
    return true;
  }

  /** Where a shard being pulled goes, served from its first bucket on (the copy of it this machine already has, if any). */
  stagingFor(manifest: ShardManifest): HeldCopy {
    const { index: shard, count } = shardRefOf(manifest);
    const version = manifest.version;
    const existing = this.ctx.copies.get(version, shard);
    if (existing) return existing;
    const { worker, server } = this.ctx.ready();
    const { buckets, totalBytes } = bucketLayout(manifest.buckets.map((b) => b.sizeBytes));
    const target = this.freeTargetFor(buckets);
    const base = { version, shard, count, kind: 'pulled' as const, buckets, totalBytes, held: new Set<number>(), manifest };
    let copy: HeldCopy;
    if (target) {
      target.holder = { version, shard };
      const memoryType = target.places.find((p) => p.region.memoryType !== 'host')?.region.memoryType ?? 'host';
      copy = { ...base, path: null, target: target.name, places: target.places, ownRegions: [], memoryType };
    } else {
      const path = join(this.ctx.config.shmDir, this.stagingName(version, shard));
      // Written by this agent's own GETs (local access); peers pulling from this relay only read it.
      const region = worker.mapFile(path, totalBytes, { create: true, access: 'remote-read' });
      const places = buckets.map((b) => ({ index: b.index, region, offset: b.offset, sizeBytes: b.sizeBytes }));
      copy = { ...base, path, target: null, places, ownRegions: [region], memoryType: 'host' };
      if (this.targets.size > 0)
        this.ctx.logger.warn(`${describeShard(version, shard)}: no free pull target fits its ${buckets.length} buckets; staging it in ${path}`);
    }
    this.ctx.copies.set(copy);
    server.offer(version, shard, copy.places);
    return copy;
  }

  /**
   * The registry's assignment names another publication of a shard than the copy here was pulled from
   * (a restarted trainer rank published other content for the same shard; the registry dropped every
   * copy of it too): the copy goes, and the shard is pulled again into a fresh region.
   */
  async dropIfSuperseded(manifest: ShardManifest): Promise<void> {
    const { index: shard } = shardRefOf(manifest);
    const copy = this.ctx.copies.get(manifest.version, shard);
    if (!copy || copy.kind !== 'pulled' || sameContent(copy.manifest, manifest)) return;
    this.ctx.copies.delete(copy);
    await this.ctx.server()?.withdraw([copy], { disconnect: false });
    this.ctx.logger.log(`${describeShard(copy.version, shard)} was published again with other content: dropping the copy pulled from the one before`);
    this.release(copy);
  }

  /** This machine changes role (lent to the trainer) or its engine restarts: its rollout copies are no longer served. */
  async dropPulled(reason: string): Promise<void> {
    const pulled = this.ctx.copies.all().filter((c) => c.kind === 'pulled');
    const server = this.ctx.server();
    if (!pulled.length || !server) return;
    this.ctx.logger.log(`dropping copies of ${pulled.map((c) => describeShard(c.version, c.shard)).join(', ')}: ${reason}`);
    await server.withdraw(pulled, { disconnect: true });
    for (const c of pulled) {
      this.ctx.copies.delete(c);
      this.release(c);
    }
  }

  /** No live rollout needs the version any longer: every shard of it here goes, whole or partial. */
  async retire(version: number): Promise<void> {
    const copies = this.ctx.copies.ofVersion(version);
    if (copies.length === 0) return;
    for (const c of copies) this.ctx.copies.delete(c);
    await this.ctx.server()?.withdraw(copies, { disconnect: false });
    const whole = copies.length === copies[0].count && copies.every(isComplete);
    this.ctx.logger.log(`version ${version} retired: dropping the ${whole ? 'whole' : 'partial'} copy`);
    for (const c of copies) this.release(c);
  }

  /**
   * Lets a copy's memory go. Unmapping waits a grace period: a puller may still be finishing a GET with the
   * old key (the registry has moved on, the network has not). Our own staging file is removed at once;
   * a process that mapped it keeps its pages. The trainer's file belongs to the framework and stays.
   */
  release(copy: HeldCopy): void {
    // A pull target is the framework's: it stays registered for the next version.
    if (copy.target !== null) {
      const t = this.targets.get(copy.target);
      if (t?.holder?.version === copy.version && t.holder.shard === copy.shard) t.holder = null;
    }
    if (copy.kind === 'pulled' && copy.path !== null) {
      try {
        unlinkSync(copy.path);
      } catch {
        /* already gone */
      }
    }
    const unmap = () => {
      for (const region of copy.ownRegions)
        try {
          region.unmap();
        } catch {
          /* the worker is closed: its mappings went with it */
        }
    };
    if (this.ctx.stopping()) unmap();
    else setTimeout(unmap, UNMAP_GRACE_MS).unref();
  }

  clear(): void {
    this.targets.clear();
  }

  /** Staging files of an earlier incarnation of this machine: the registry will have us pull again. */
  removeStale(): void {
    const prefix = this.stagingPrefix();
    try {
      for (const name of readdirSync(this.ctx.config.shmDir)) if (name.startsWith(prefix)) unlinkSync(join(this.ctx.config.shmDir, name));
    } catch (err) {
      this.ctx.logger.warn(`could not clean ${this.ctx.config.shmDir}: ${String(err)}`);
    }
  }

  /** One file per (version, shard); shard 0's keeps the name a version of one shard always had. */
  private stagingName(version: number, shard: number): string {
    return `${this.stagingPrefix()}${version}${shard === 0 ? '' : `-s${shard}`}`;
  }

  private stagingPrefix(): string {
    return `robustrl-${safeName(this.ctx.config.jobId)}-${safeName(this.ctx.config.machineId)}-v`;
  }

  /** The copy held in a target (a copy retired or dropped since leaves it free). */
  private occupant(t: PullTarget): HeldCopy | undefined {
    const copy = t.holder ? this.ctx.copies.get(t.holder.version, t.holder.shard) : undefined;
    return copy?.target === t.name ? copy : undefined;
  }

  private freeTargetFor(buckets: readonly BucketSpan[]): PullTarget | undefined {
    for (const t of this.targets.values()) {
      if (this.occupant(t)) continue;
      if (t.places.length === buckets.length && t.places.every((p, i) => p.sizeBytes === buckets[i].sizeBytes)) return t;
    }
    return undefined;
  }
}

/** Two publications of the same content (contracts' publicationDigest: buckets and named tensors); usually the very same manifest. */
const sameContent = (a: ShardManifest, b: ShardManifest) => a === b || publicationDigest(a) === publicationDigest(b);
