import { lookup } from 'node:dns/promises';
import { isIPv4 } from 'node:net';
import { existsSync, readdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { Delivery, MessageBus, PullGrantOpener, sameToken, Subscription } from '@robustrl/bus';
import { DataOf, MessageOf, Topics } from '@robustrl/contracts';
import { cuda, isAvailable, MemoryRegion, MemoryType, ucxInfo, UcxUnavailableError, UcxWorker } from '@robustrl/ucx';
import { fullChecksum, regionReader, sampledChecksum } from './bucket-checksum';
import { BucketSpan, bucketLayout } from './bucket-layout';
import { pullBucket, PullLimits } from './bucket-puller';
import { SourceLinks } from './source-links';
import { BucketPlace, WeightServer } from './weight-server';

export interface WeightPlaneConfig {
  jobId: string;
  machineId: string;
  /**
   * UCX listener: the host pullers reach it at (an IPv4 address, or a name resolved to one at start),
   * the port (0: any free port), and the address it binds — null: the advertised address itself, so the
   * weight server listens on that interface only (issue 15), not on every one.
   */
  bindHost: string | null;
  port: number;
  advertiseHost: string;
  /** Where the named shared-memory regions live (`/dev/shm`). */
  shmDir: string;
  limits: PullLimits;
  /**
   * The CUDA device whose memory the weight plane moves (its context is made current before the UCX
   * worker: gpu-offline-build.md rule 2): a number, 'auto' (device 0 where this UCX can register CUDA
   * memory and the driver sees a device; the default) or 'none' (host memory only; no CUDA context).
   */
  cudaDevice?: number | 'auto' | 'none';
  /**
   * This machine's own key (ROBUSTRL_MACHINE_KEY), with identity on: it opens the pull grants sealed
   * for this machine (libs/bus/src/identity/pull-grants.ts). Then an assignment is honoured only with a
   * grant this machine can open, and a region is served only against the grant's token.
   */
  machineKey?: Buffer;
}

type WeightInput = MessageOf<'WeightVersionPublished' | 'WeightPullAssigned' | 'WeightVersionRetired' | 'TrainerReleased'>;
type Emit = <T extends 'WeightVersionPublished' | 'WeightPullCompleted' | 'WeightPullFailed'>(type: T, data: DataOf<T>, cause?: WeightInput) => Promise<string>;

/**
 * A version in this machine's memory: published by the local trainer, or pulled (possibly still
 * partial). Its buckets lie in one `/dev/shm` region (`path`) or each in device memory the framework
 * handed over as a CUDA IPC handle (a trainer's published buckets, or a rollout's pull `target`).
 */
interface HeldCopy {
  version: number;
  kind: 'published' | 'pulled';
  /** The `/dev/shm` file, or null for a version in device buffers. */
  path: string | null;
  /** The pull target (device buffers a rollout registered) it was pulled into, or null. */
  target: string | null;
  buckets: BucketSpan[];
  places: BucketPlace[];
  /** Regions this copy registered itself, unmapped when it goes (a target's stay with the target). */
  ownRegions: MemoryRegion[];
  totalBytes: number;
  memoryType: MemoryType;
  held: Set<number>;
}

/** One bucket handed over as a CUDA IPC handle (python/robustrl_weights exports them). */
export interface IpcBucket {
  sizeBytes: number;
  /** The 64-byte cudaIpcMemHandle_t, base64. */
  handle: string;
  /** Where the bucket starts in the exported allocation. */
  offset: number;
  device: number;
}

/** Device buffers a rollout framework registered to receive versions into, one per bucket (`targets`). */
interface PullTarget {
  name: string;
  places: BucketPlace[];
  /** The version whose copy occupies it, or null when free. */
  version: number | null;
}

export class WeightTransferUnavailableError extends Error {}

/**
 * The agent's half of weight synchronisation (paper §5.2.1, §5.2.2). The registry decides who pulls what
 * from whom; this carries it out on the machine:
 *   - trainer: the framework writes a version into a named `/dev/shm` region and calls `publish`; the agent
 *     maps that memory (zero copy), checksums each bucket and publishes the manifest with its region;
 *   - rollout: each WeightPullAssigned addressed here GETs one bucket into the version's staging region
 *     (itself a `/dev/shm` file the framework reads once the version is whole), verifies it and reports;
 *   - both serve what they hold through the UCX weight server, so a rollout relays from its first bucket.
 * Without the native UCX module every entry point refuses with the module's reason.
 */
export class WeightPlane {
  private readonly logger: Logger;
  private worker?: UcxWorker;
  private server?: WeightServer;
  private links?: SourceLinks;
  private subscription?: Subscription;
  private readonly manifests = new Map<number, DataOf<'WeightVersionPublished'>>();
  /**
   * Pulls the registry assigned with this machine as their source: whom its catalog may go to
   * (weight-server.ts), and with identity on the token the puller must present.
   */
  private readonly assignedFromHere = new Map<string, { pullerId: string; version: number; token: Buffer | null }>();
  private readonly copies = new Map<number, HeldCopy>();
  private readonly targets = new Map<string, PullTarget>();
  private readonly released = new Set<number>();
  private queue: Promise<void> = Promise.resolve();
  private readonly startedAt = Date.now();
  private stopping = false;
  /** With identity on: opens the pull grants sealed for this machine. */
  private readonly grants?: PullGrantOpener;
  address: string | null = null;

  constructor(
    private readonly config: WeightPlaneConfig,
    private readonly bus: MessageBus,
    private readonly emit: Emit,
  ) {
    this.logger = new Logger(`weights/${config.machineId}`);
    if (config.machineKey) this.grants = new PullGrantOpener(config.machineKey);
  }

  get available(): boolean {
    return isAvailable();
  }
  get unavailableReason(): string {
    return `weight transfer unavailable on ${this.config.machineId}: ${ucxInfo().reason ?? 'unknown reason'}`;
  }

  /** Starts the weight server and follows the weights topic; returns the advertised address, or null without UCX. */
  async start(): Promise<string | null> {
    if (!this.available) {
      this.logger.warn(`${this.unavailableReason}; this machine will neither pull nor serve weights`);
      return null;
    }
    this.removeStaleStaging();
    const cudaDevice = this.resolveCudaDevice();
    this.worker = new UcxWorker(cudaDevice === null ? {} : { cudaDevice });
    this.server = new WeightServer(this.worker, (request) => this.grantFor(request));
    const advertised = await ipv4Of(this.config.advertiseHost);
    this.address = this.server.listen(this.config.bindHost ?? advertised, this.config.port, advertised);
    this.links = new SourceLinks(this.worker, Math.min(this.config.limits.opTimeoutMs, 10_000));
    this.links.start();
    // From the beginning: a machine that joins late needs the manifests published before it came.
    this.subscription = await this.bus.subscribe({
      groupId: `robustrl-agent-${this.config.machineId}-weights-${this.startedAt}`,
      topics: [Topics.weights],
      types: ['WeightVersionPublished', 'WeightPullAssigned', 'WeightVersionRetired', 'TrainerReleased'],
      fromBeginning: true,
      handler: (d) => this.onWeightMessage(d as Delivery<WeightInput>),
    });
    this.logger.log(
      `weight server on ${this.address} (UCX ${ucxInfo().version}; ${cudaDevice === null ? 'host memory only' : `CUDA device ${cudaDevice}: buckets may be in device memory`})`,
    );
    return this.address;
  }

  /** The device for the worker's CUDA context, or null for none (WeightPlaneConfig.cudaDevice). */
  private resolveCudaDevice(): number | null {
    const wanted = this.config.cudaDevice ?? 'auto';
    if (wanted === 'none') return null;
    if (wanted === 'auto') {
      if (!ucxInfo().cudaSupported) return null;
      const info = cuda.info();
      return info.available && info.devices.length > 0 ? 0 : null;
    }
    return wanted;
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.subscription?.close();
    await this.queue.catch(() => undefined);
    this.links?.close();
    this.server?.close();
    for (const copy of this.copies.values()) this.release(copy);
    this.copies.clear();
    this.targets.clear();
    this.worker?.close();
  }

  // ── trainer side ───────────────────────────────────────────────────────────────────────────────
  /**
   * The framework wrote version `version` into `<shmDir>/<shmName>`, buckets back to back with these
   * sizes. Maps it, checksums it, serves it and publishes the manifest (paper §5.2.1 ➀).
   */
  async publish(req: {
    version: number;
    step: number;
    shmName: string;
    bucketSizes: number[];
  }): Promise<{ eventId: string; totalBytes: number; checksums: string[] }> {
    const { worker, server } = this.ready();
    if (!/^[A-Za-z0-9._-]+$/.test(req.shmName))
      throw new RangeError(`shmName must be a plain file name in ${this.config.shmDir}, got ${JSON.stringify(req.shmName)}`);
    const path = join(this.config.shmDir, req.shmName);
    if (!existsSync(path)) throw new RangeError(`no shared-memory region ${path}: write the weights there first`);
    const { buckets, totalBytes } = bucketLayout(req.bucketSizes);
    if (totalBytes === 0) throw new RangeError('a version needs at least one non-empty bucket');
    // Peers only ever read a version (they GET from it): registered for remote read only, so an RDMA
    // NIC refuses a PUT into it (README "Reconnect", "Who may read what").
    const region = worker.mapFile(path, totalBytes, { access: 'remote-read' });
    const places = buckets.map((b) => ({ index: b.index, region, offset: b.offset, sizeBytes: b.sizeBytes }));
    const checksums = places.map((p) => fullChecksum(regionReader(p.region, p.offset), p.sizeBytes));
    return this.serveAndAnnounce(req, { path, target: null, buckets, places, ownRegions: [region], totalBytes, memoryType: 'host' }, checksums, server);
  }

  /**
   * The framework's version `version` lies in device memory, each bucket handed over as a CUDA IPC
   * handle (per rank, per bucket: python/robustrl_weights). Opens and registers each bucket, checksums
   * it by samples (bucket-checksum.ts: a full checksum would copy the version to the host), serves it
   * and publishes the manifest. The framework keeps the buffers alive and unchanged until the version is
   * retired (WeightVersionRetired; GET /weights/versions/:version).
   */
  async publishDevice(req: { version: number; step: number; buckets: IpcBucket[] }): Promise<{ eventId: string; totalBytes: number; checksums: string[] }> {
    const { server } = this.ready();
    const { buckets, totalBytes } = bucketLayout(req.buckets.map((b) => b.sizeBytes));
    if (totalBytes === 0) throw new RangeError('a version needs at least one non-empty bucket');
    const regions = this.mapIpcBuckets(req.buckets, 'remote-read');
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

  /** Registers one region per bucket from its IPC handle; on a failure, unmaps those already made and says which bucket. */
  private mapIpcBuckets(buckets: readonly IpcBucket[], access: 'remote-read' | 'read-write'): MemoryRegion[] {
    const { worker } = this.ready();
    const regions: MemoryRegion[] = [];
    try {
      buckets.forEach((b, i) => {
        const handle = Buffer.from(b.handle, 'base64');
        if (handle.length !== 64) throw new RangeError(`bucket ${i}: handle must be the 64 bytes of a CUDA IPC handle (base64), got ${handle.length}`);
        try {
          regions.push(worker.mapIpc({ handle, offset: b.offset, length: b.sizeBytes, device: b.device }, { access }));
        } catch (err) {
          // No CUDA here (503 to the framework) vs. a handle this machine cannot use (400: the caller's to fix).
          const why = `bucket ${i}: ${err instanceof Error ? err.message : String(err)}`;
          throw err instanceof UcxUnavailableError ? new WeightTransferUnavailableError(why) : new RangeError(why, { cause: err });
        }
      });
    } catch (err) {
      for (const r of regions) r.unmap();
      throw err;
    }
    return regions;
  }

  private async serveAndAnnounce(
    req: { version: number; step: number },
    held: Omit<HeldCopy, 'version' | 'kind' | 'held'>,
    checksums: string[],
    server: WeightServer,
  ): Promise<{ eventId: string; totalBytes: number; checksums: string[] }> {
    const { buckets, totalBytes } = held;
    const old = this.copies.get(req.version);
    this.copies.set(req.version, { version: req.version, kind: 'published', ...held, held: new Set(buckets.map((b) => b.index)) });
    server.offer(req.version, held.places);
    if (old) this.release(old);
    this.released.delete(req.version);
    const eventId = await this.emit('WeightVersionPublished', {
      version: req.version,
      step: req.step,
      buckets: buckets.map((b, i) => ({ index: b.index, sizeBytes: b.sizeBytes, checksum: checksums[i] })),
      totalBytes,
      // Its region's address and key are not published: the weight server hands them to assigned pullers only.
      sources: [{ instanceId: this.config.machineId, address: server.advertisedAddress }],
    });
    this.logger.log(
      `published version ${req.version} (step ${req.step}, ${buckets.length} buckets, ${totalBytes} bytes) from ${held.path ?? `${held.memoryType} memory (CUDA IPC)`}`,
    );
    return { eventId, totalBytes, checksums };
  }

  // ── rollout side: device buffers to pull into ───────────────────────────────────────────────────
  /**
   * A rollout framework hands over device buffers, one per bucket of the model's versions, to receive
   * versions into (double-buffering: register two). A version is pulled into a free target whose bucket
   * sizes match its manifest, else into `/dev/shm` staging as before. A target is free again once its
   * version is retired or dropped; registering a name again replaces it.
   */
  registerTarget(req: { name: string; buckets: IpcBucket[] }): { name: string; buckets: number; totalBytes: number; memoryType: MemoryType } {
    this.ready();
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(req.name)) throw new RangeError(`target name must be 1-64 of [A-Za-z0-9._-], got ${JSON.stringify(req.name)}`);
    if (req.buckets.length === 0) throw new RangeError('a target needs at least one bucket');
    const { buckets, totalBytes } = bucketLayout(req.buckets.map((b) => b.sizeBytes));
    // Written by this agent's own GETs (local access); relays serve from it, so peers only read it.
    const regions = this.mapIpcBuckets(req.buckets, 'remote-read');
    this.removeTarget(req.name);
    this.targets.set(req.name, {
      name: req.name,
      places: buckets.map((b, i) => ({ index: b.index, region: regions[i], offset: 0, sizeBytes: b.sizeBytes })),
      version: null,
    });
    const memoryType = regions.find((r) => r.memoryType !== 'host')?.memoryType ?? 'host';
    this.logger.log(`pull target ${req.name}: ${buckets.length} buckets, ${totalBytes} bytes of ${memoryType} memory`);
    return { name: req.name, buckets: buckets.length, totalBytes, memoryType };
  }

  /** The framework takes its buffers back: a version held there is dropped (no longer served), then they are unmapped. */
  removeTarget(name: string): boolean {
    const t = this.targets.get(name);
    if (!t) return false;
    this.targets.delete(name);
    const copy = t.version === null ? undefined : this.copies.get(t.version);
    if (copy?.target === name) {
      this.copies.delete(copy.version);
      void this.server?.withdraw([copy.version], { disconnect: true });
    }
    const regions = new Set(t.places.map((p) => p.region));
    const unmap = () => regions.forEach((r) => r.unmap());
    if (this.stopping) unmap();
    else setTimeout(unmap, UNMAP_GRACE_MS).unref();
    return true;
  }

  /**
   * The trainer process died: what it left in shared memory may be half written, and the paper's rule is
   * that pullers drop partial copies and wait for the recovered trainer (§5.2.2). Stop serving at once —
   * closing every endpoint fails in-flight GETs immediately — then let the memory go.
   */
  async withdrawPublished(reason: string): Promise<void> {
    const published = [...this.copies.values()].filter((c) => c.kind === 'published');
    if (!published.length || !this.server) return;
    this.logger.warn(`withdrawing versions ${published.map((c) => c.version).join(', ')}: ${reason}`);
    await this.server.withdraw(
      published.map((c) => c.version),
      { disconnect: true },
    );
    for (const c of published) {
      this.copies.delete(c.version);
      this.release(c);
    }
  }

  /** This machine changes role (lent to the trainer): its rollout copies are no longer served. */
  async dropPulled(reason: string): Promise<void> {
    const pulled = [...this.copies.values()].filter((c) => c.kind === 'pulled');
    if (!pulled.length || !this.server) return;
    this.logger.log(`dropping copies of versions ${pulled.map((c) => c.version).join(', ')}: ${reason}`);
    await this.server.withdraw(
      pulled.map((c) => c.version),
      { disconnect: true },
    );
    for (const c of pulled) {
      this.copies.delete(c.version);
      this.release(c);
    }
  }

  // ── queries for the framework ──────────────────────────────────────────────────────────────────
  status() {
    return {
      available: this.available,
      reason: this.available ? null : this.unavailableReason,
      address: this.address,
      versions: [...this.copies.values()]
        .sort((a, b) => a.version - b.version)
        .map((c) => ({
          version: c.version,
          kind: c.kind,
          path: c.path,
          target: c.target,
          memoryType: c.memoryType,
          heldBuckets: c.held.size,
          totalBuckets: c.buckets.length,
          complete: c.held.size === c.buckets.length,
          trainerReleased: this.released.has(c.version),
        })),
    };
  }

  /** The newest version this machine holds whole, for the framework to load (paper §5.2.1 ➃). */
  latest() {
    this.ready();
    const whole = [...this.copies.values()].filter((c) => c.held.size === c.buckets.length).sort((a, b) => b.version - a.version)[0];
    if (!whole) return null;
    const m = this.manifests.get(whole.version);
    return {
      version: whole.version,
      step: m?.step ?? null,
      kind: whole.kind,
      path: whole.path,
      target: whole.target,
      memoryType: whole.memoryType,
      totalBytes: whole.totalBytes,
      buckets: m?.buckets ?? [],
    };
  }

  versionStatus(version: number) {
    const c = this.copies.get(version);
    return c ? this.status().versions.find((v) => v.version === version)! : { version, trainerReleased: this.released.has(version), heldBuckets: 0 };
  }

  // ── the weights topic ──────────────────────────────────────────────────────────────────────────
  private async onWeightMessage(delivery: Delivery<WeightInput>): Promise<void> {
    const m = delivery.message;
    if (m.jobId !== this.config.jobId || this.stopping) return;
    switch (m.type) {
      case 'WeightVersionPublished':
        this.manifests.set(m.data.version, m.data);
        return;
      case 'TrainerReleased':
        this.released.add(m.data.version);
        return;
      case 'WeightVersionRetired':
        return this.retire(m.data.version);
      case 'WeightPullAssigned': {
        if (m.data.sourceId === this.config.machineId) this.rememberAssignment(m.data);
        if (m.data.pullerId !== this.config.machineId) return;
        // Replayed from the beginning: assignments to an earlier incarnation of this machine are void
        // (the registry forgot its holdings when it registered again).
        if (Date.parse(m.occurredAt) < this.startedAt) return;
        // One bucket at a time, in order (the registry's window); the handler returns at once so the
        // subscription keeps reading (a retirement must not wait behind a slow pull).
        this.queue = this.queue.then(() => this.execute(m)).catch((err) => this.logger.error(`pull ${m.data.pullId}: ${String(err)}`));
        return;
      }
    }
  }

  private async execute(a: MessageOf<'WeightPullAssigned'>): Promise<void> {
    const d = a.data;
    const { pullId, version, bucketIndex, pullerId, sourceId } = d;
    const fail = (reason: string) => this.emit('WeightPullFailed', { pullId, version, bucketIndex, pullerId, sourceId, reason }, a);
    const manifest = this.manifests.get(version);
    if (!manifest) return void (await fail(`no manifest of version ${version} seen by ${pullerId}`));
    const spec = manifest.buckets.find((b) => b.index === bucketIndex);
    if (!spec) return void (await fail(`version ${version} has no bucket ${bucketIndex}`));
    let copy: HeldCopy;
    try {
      copy = this.stagingFor(version, manifest);
    } catch (err) {
      // E.g. /dev/shm full: say so, or the registry would wait on this pull forever.
      return void (await fail(`no staging region for version ${version} on ${pullerId}: ${err instanceof Error ? err.message : String(err)}`));
    }
    let token: string | undefined;
    if (this.grants) {
      const opened = d.grant ? this.grants.open('puller', d, d.grant.forPuller) : null;
      if (!opened) return void (await fail(`pull ${pullId} carries no grant ${pullerId} can open: not from the weight registry, or not for this machine`));
      token = opened.toString('base64url');
    }
    const into = copy.places[bucketIndex];
    if (!into) return void (await fail(`version ${version} has no bucket ${bucketIndex} in its layout`));
    const outcome = await pullBucket(
      this.links!,
      into,
      {
        version,
        bucketIndex,
        checksum: spec.checksum,
        sourceAddress: d.sourceAddress,
        pullId,
        pullerId,
        token,
      },
      this.config.limits,
      () => this.stopping || this.copies.get(version) !== copy,
    );
    // Retired while pulling: the copy is gone; the registry already failed this pull.
    if (this.copies.get(version) !== copy) return;
    if (!outcome.ok) {
      this.logger.warn(`pull ${pullId} from ${sourceId} failed: ${outcome.reason}`);
      return void (await fail(outcome.reason));
    }
    copy.held.add(bucketIndex);
    const { transfer } = outcome;
    if (transfer.emulated)
      this.logger.error(
        `pull ${pullId}: UCX moved ${transfer.sourceMemory} → ${transfer.localMemory} memory by software emulation (${transfer.protocol}); ` +
          'expect about 0.1 GB/s instead of hundreds. Is UCX_CUDA_IPC_ENABLE_GET_ZCOPY off, or was a worker created before its CUDA context?',
      );
    await this.emit(
      'WeightPullCompleted',
      {
        pullId,
        version,
        bucketIndex,
        pullerId,
        sourceId,
        bytes: outcome.bytes,
        durationMs: outcome.durationMs,
        transfer,
      },
      a,
    );
    if (copy.held.size === copy.buckets.length)
      this.logger.log(`holds version ${version} whole (${copy.totalBytes} bytes in ${copy.path ?? `pull target ${copy.target}`})`);
  }

  /**
   * Where a version being pulled goes, served from its first bucket on: a free pull target whose buckets
   * fit the manifest (device memory the rollout framework gave), else a `/dev/shm` staging file.
   */
  private stagingFor(version: number, manifest: DataOf<'WeightVersionPublished'>): HeldCopy {
    const existing = this.copies.get(version);
    if (existing) return existing;
    const { worker, server } = this.ready();
    const { buckets, totalBytes } = bucketLayout(manifest.buckets.map((b) => b.sizeBytes));
    const target = this.freeTargetFor(buckets);
    let copy: HeldCopy;
    if (target) {
      target.version = version;
      const memoryType = target.places.find((p) => p.region.memoryType !== 'host')?.region.memoryType ?? 'host';
      copy = {
        version,
        kind: 'pulled',
        path: null,
        target: target.name,
        buckets,
        places: target.places,
        ownRegions: [],
        totalBytes,
        memoryType,
        held: new Set(),
      };
    } else {
      const path = join(this.config.shmDir, this.stagingPrefix() + version);
      // Written by this agent's own GETs (local access); peers pulling from this relay only read it.
      const region = worker.mapFile(path, totalBytes, { create: true, access: 'remote-read' });
      const places = buckets.map((b) => ({ index: b.index, region, offset: b.offset, sizeBytes: b.sizeBytes }));
      copy = { version, kind: 'pulled', path, target: null, buckets, places, ownRegions: [region], totalBytes, memoryType: 'host', held: new Set() };
      if (this.targets.size > 0) this.logger.warn(`version ${version}: no free pull target fits its ${buckets.length} buckets; staging it in ${path}`);
    }
    this.copies.set(version, copy);
    server.offer(version, copy.places);
    return copy;
  }

  private freeTargetFor(buckets: readonly BucketSpan[]): PullTarget | undefined {
    for (const t of this.targets.values()) {
      if (t.version !== null && this.copies.get(t.version)?.target === t.name) continue;
      if (t.places.length === buckets.length && t.places.every((p, i) => p.sizeBytes === buckets[i].sizeBytes)) return t;
    }
    return undefined;
  }

  private rememberAssignment(a: DataOf<'WeightPullAssigned'>): void {
    let token: Buffer | null = null;
    if (this.grants) {
      // Any agent may write the weights topic; only the registry can seal a grant this machine opens.
      token = a.grant ? this.grants.open('source', a, a.grant.forSource) : null;
      if (!token) return void this.logger.warn(`ignoring pull ${a.pullId} to ${a.pullerId}: no grant this machine can open (not from the weight registry)`);
    }
    // Bounded: the oldest go first (a retired version's go with it, below).
    if (this.assignedFromHere.size >= MAX_REMEMBERED_ASSIGNMENTS) this.assignedFromHere.delete(this.assignedFromHere.keys().next().value!);
    this.assignedFromHere.set(a.pullId, { pullerId: a.pullerId, version: a.version, token });
  }

  /**
   * Whether a puller may have this machine's region of a version: only for a pull the registry assigned
   * from here, to that puller, of that version. The puller may ask before this machine has read the
   * assignment (both read the weights topic): it is waited for, as long as a puller waits for a catalog.
   */
  private async grantFor(request: { pullId: string; pullerId: string; version: number; token?: string }): Promise<string | null> {
    const deadline = Date.now() + this.config.limits.catalogWaitMs;
    for (;;) {
      const a = this.assignedFromHere.get(request.pullId);
      if (a) {
        if (a.pullerId !== request.pullerId || a.version !== request.version)
          return `pull ${request.pullId} was assigned to ${a.pullerId} for version ${a.version}, not to ${request.pullerId} for version ${request.version}`;
        if (a.token && !(request.token && sameToken(a.token, request.token)))
          return `pull ${request.pullId} asked for without its grant's token: only ${a.pullerId} holds it`;
        return null;
      }
      if (this.stopping || Date.now() >= deadline)
        return `the weight registry assigned no pull ${request.pullId} from ${this.config.machineId} to ${request.pullerId}`;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  private async retire(version: number): Promise<void> {
    for (const [pullId, a] of this.assignedFromHere) if (a.version === version) this.assignedFromHere.delete(pullId);
    this.manifests.delete(version);
    this.released.delete(version);
    const copy = this.copies.get(version);
    if (!copy) return;
    this.copies.delete(version);
    await this.server?.withdraw([version], { disconnect: false });
    this.logger.log(`version ${version} retired: dropping the ${copy.held.size === copy.buckets.length ? 'whole' : 'partial'} copy`);
    this.release(copy);
  }

  /**
   * Lets a copy's memory go. Unmapping waits a grace period: a puller may still be finishing a GET with the
   * old key (the registry has moved on, the network has not). Our own staging file is removed at once;
   * a process that mapped it keeps its pages. The trainer's file belongs to the framework and stays.
   */
  private release(copy: HeldCopy): void {
    // A pull target is the framework's: it stays registered for the next version.
    if (copy.target !== null) {
      const t = this.targets.get(copy.target);
      if (t?.version === copy.version) t.version = null;
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
    if (this.stopping) unmap();
    else setTimeout(unmap, UNMAP_GRACE_MS).unref();
  }

  private stagingPrefix(): string {
    return `robustrl-${safeName(this.config.jobId)}-${safeName(this.config.machineId)}-v`;
  }

  /** Staging files of an earlier incarnation of this machine: the registry will have us pull again. */
  private removeStaleStaging(): void {
    const prefix = this.stagingPrefix();
    try {
      for (const name of readdirSync(this.config.shmDir)) if (name.startsWith(prefix)) unlinkSync(join(this.config.shmDir, name));
    } catch (err) {
      this.logger.warn(`could not clean ${this.config.shmDir}: ${String(err)}`);
    }
  }

  private ready(): { worker: UcxWorker; server: WeightServer } {
    if (!this.worker || !this.server) throw new WeightTransferUnavailableError(this.available ? 'weight plane not started' : this.unavailableReason);
    return { worker: this.worker, server: this.server };
  }
}

const UNMAP_GRACE_MS = 10_000;
const safeName = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, '_');

/** Assignments from this machine kept for granting catalogs: far more than pulls in flight at once. */
const MAX_REMEMBERED_ASSIGNMENTS = 100_000;

/** UCX's listener and connections take IPv4 addresses: a host name (a pod's, `$(hostname)`) is resolved once. */
async function ipv4Of(host: string): Promise<string> {
  if (isIPv4(host)) return host;
  try {
    return (await lookup(host, { family: 4 })).address;
  } catch (err) {
    throw new Error(`ROBUSTRL_WEIGHTS_ADVERTISE_HOST '${host}' has no IPv4 address: ${(err as Error).message}`);
  }
}
