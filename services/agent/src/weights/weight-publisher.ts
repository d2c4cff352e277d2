import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { manifestProblems, SINGLE_SHARD, WeightShardRef, WeightTensor } from '@robustrl/contracts';
import { regionReader, sampledChecksum } from './bucket-checksum';
import { bucketLayout } from './bucket-layout';
import { fileChecksums } from './file-checksums';
import { describeShard, HeldCopy, ShardManifest } from './held-copies';
import { IpcBucket, mapIpcBuckets } from './ipc-buckets';
import { Emit, PlaneContext } from './plane-context';
import { WeightServer } from './weight-server';

/**
 * What a trainer rank publishes besides its bytes (docs/integrators/weights.md: what a manifest holds): the named
 * tensors in its buckets and which shard of the version it is. Both optional: absent, the version is
 * opaque bytes from one publisher, as before shards.
 */
export interface Publication {
  version: number;
  step: number;
  tensors?: WeightTensor[];
  shard?: WeightShardRef;
}

type Published = { eventId: string; totalBytes: number; checksums: string[] };

/**
 * The trainer side of the weight plane (paper §5.2.1 ➀): a rank's framework writes its shard of version
 * `v` into memory and hands it over; the agent maps it (zero copy), checksums each bucket (on a worker
 * thread for a file, by samples for device memory), serves it and publishes the manifest. Several ranks on one machine publish several shards through the same agent:
 * each is a copy of its own, served side by side.
 */
export class WeightPublisher {
  constructor(
    private readonly ctx: PlaneContext,
    private readonly emit: Emit,
    /** Versions the registry released the trainer from: a new publication of one is not released. */
    private readonly released: Set<number>,
  ) {}

  /** The shard lies in `<shmDir>/<shmName>`, buckets back to back with these sizes. */
  async publish(req: Publication & { shmName: string; bucketSizes: number[] }): Promise<Published> {
    const { worker, server } = this.ctx.ready();
    if (!/^[A-Za-z0-9._-]+$/.test(req.shmName))
      throw new RangeError(`shmName must be a plain file name in ${this.ctx.config.shmDir}, got ${JSON.stringify(req.shmName)}`);
    const path = join(this.ctx.config.shmDir, req.shmName);
    if (!existsSync(path)) throw new RangeError(`no shared-memory region ${path}: write the weights there first`);
    const { buckets, totalBytes } = bucketLayout(req.bucketSizes);
    if (totalBytes === 0) throw new RangeError('a version needs at least one non-empty bucket');
    checkManifest(req, buckets);
    // Peers only ever read a version (they GET from it): registered for remote read only, so an RDMA
    // NIC refuses a PUT into it (docs/integrators/weights.md "Who may read what").
    const region = worker.mapFile(path, totalBytes, { access: 'remote-read' });
    const places = buckets.map((b) => ({ index: b.index, region, offset: b.offset, sizeBytes: b.sizeBytes }));
    let checksums: string[];
    try {
      // Off the agent's thread (file-checksums.ts): a large version must not silence the agent.
      checksums = await fileChecksums(path, places);
    } catch (err) {
      region.unmap();
      throw err;
    }
    return this.serveAndAnnounce(req, { path, target: null, buckets, places, ownRegions: [region], totalBytes, memoryType: 'host' }, checksums, server);
  }

  /**
   * The shard lies in device memory, each bucket handed over as a CUDA IPC handle (per rank, per bucket:
   * python/robustrl_weights). Copies each bucket device to device into the agent's own memory and
   * registers the copy (peers cannot GET over cuda_ipc from memory the agent imported: native/ucx/README.md "GPU"),
   * checksums it by samples (bucket-checksum.ts: a full checksum would copy the version to the host),
   * serves it and publishes the manifest. The framework may reuse its buffers once this returns.
   */
  async publishDevice(req: Publication & { buckets: IpcBucket[] }): Promise<Published> {
    const { worker, server } = this.ctx.ready();
    const { buckets, totalBytes } = bucketLayout(req.buckets.map((b) => b.sizeBytes));
    if (totalBytes === 0) throw new RangeError('a version needs at least one non-empty bucket');
    checkManifest(req, buckets);
    const regions = mapIpcBuckets(worker, req.buckets, 'remote-read', { copy: true });
    const places = buckets.map((b, i) => ({ index: b.index, region: regions[i], offset: 0, sizeBytes: b.sizeBytes }));
    let checksums: string[];
    try {
      checksums = places.map((p) => sampledChecksum(regionReader(p.region, p.offset), p.sizeBytes));
    } catch (err) {
      for (const r of regions) r.unmap();
      throw err;
    }
    const memoryType = regions.find((r) => r.memoryType !== 'host')?.memoryType ?? 'host';
    return this.serveAndAnnounce(req, { path: null, target: null, buckets, places, ownRegions: regions, totalBytes, memoryType }, checksums, server);
  }

  /**
   * The trainer process died: what it left in memory may be half written, and the paper's rule is that
   * pullers drop partial copies and wait for the recovered trainer (§5.2.2). Stop serving every shard it
   * published at once — closing every endpoint fails in-flight GETs immediately — then let the memory go.
   */
  async withdraw(reason: string): Promise<void> {
    const published = this.ctx.copies.all().filter((c) => c.kind === 'published');
    const server = this.ctx.server();
    if (!published.length || !server) return;
    this.ctx.logger.warn(`withdrawing ${published.map((c) => describeShard(c.version, c.shard)).join(', ')}: ${reason}`);
    await server.withdraw(published, { disconnect: true });
    for (const c of published) {
      this.ctx.copies.delete(c);
      this.ctx.release(c);
    }
  }

  private async serveAndAnnounce(
    req: Publication,
    held: Pick<HeldCopy, 'path' | 'target' | 'buckets' | 'places' | 'ownRegions' | 'totalBytes' | 'memoryType'>,
    checksums: string[],
    server: WeightServer,
  ): Promise<Published> {
    const { buckets, totalBytes } = held;
    const ref = req.shard ?? SINGLE_SHARD;
    const manifest: ShardManifest = {
      version: req.version,
      step: req.step,
      buckets: buckets.map((b, i) => ({ index: b.index, sizeBytes: b.sizeBytes, checksum: checksums[i] })),
      totalBytes,
      // Its region's address and key are not published: the weight server hands them to assigned pullers only.
      sources: [{ instanceId: this.ctx.config.machineId, address: server.advertisedAddress }],
      ...(req.tensors ? { tensors: req.tensors } : {}),
      ...(req.shard ? { shard: req.shard } : {}),
      ...certificateOf(this.ctx.config.publisherCertificate?.()),
      ...epochOf(this.ctx.config.trainerEpoch?.()),
    };
    const old = this.ctx.copies.get(req.version, ref.index);
    this.ctx.copies.set({
      version: req.version,
      shard: ref.index,
      count: ref.count,
      kind: 'published',
      ...held,
      held: new Set(buckets.map((b) => b.index)),
      manifest,
    });
    server.offer(req.version, ref.index, held.places);
    if (old) this.ctx.release(old);
    this.released.delete(req.version);
    const eventId = await this.emit('WeightVersionPublished', manifest);
    this.ctx.logger.log(
      `published ${describeShard(req.version, ref.index)}${ref.count > 1 ? ` of ${ref.count}` : ''} (step ${req.step}, ${buckets.length} buckets, ` +
        `${totalBytes} bytes${req.tensors ? `, ${req.tensors.length} tensors` : ''}) from ${held.path ?? `${held.memoryType} memory (CUDA IPC)`}`,
    );
    return { eventId, totalBytes, checksums };
  }
}

/** A manifest the registry and every puller could not trust is refused before anything is mapped (a 400). */
function checkManifest(req: Publication, buckets: ReadonlyArray<{ index: number; sizeBytes: number }>): void {
  const problems = manifestProblems({ buckets, tensors: req.tensors, shard: req.shard });
  if (problems.length > 0) throw new RangeError(problems.map((p) => p.message).join('; '));
}

/** The epoch the registry fences the manifest by (docs/contributors/recovery.md "Fencing"), where the agent knows one. */
function epochOf(trainerEpoch: number | undefined): { trainerEpoch?: number } {
  return trainerEpoch === undefined ? {} : { trainerEpoch };
}

/** The manifest's publisher certificate, where this machine has one (libs/bus role-certificates.ts). */
function certificateOf(certificate: string | undefined): { publisherCertificate?: string } {
  return certificate ? { publisherCertificate: certificate } : {};
}
