import { lookup } from 'node:dns/promises';
import { isIPv4 } from 'node:net';
import { Logger } from '@nestjs/common';
import { Delivery, MessageBus, PullGrantOpener, Subscription, VoucherCheck } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { cuda, isAvailable, MemoryType, ucxInfo, UcxWorker } from '@robustrl/ucx';
import { HeldCopies, HeldCopy, isComplete } from './held-copies';
import { IpcBucket, WeightTransferUnavailableError } from './ipc-buckets';
import { Emit, PlaneContext, WeightInput, WeightPlaneConfig } from './plane-context';
import { PullExecutor } from './pull-executor';
import { PullStaging } from './pull-staging';
import { ServingGrants } from './serving-grants';
import { SourceLinks } from './source-links';
import { Publication, WeightPublisher } from './weight-publisher';
import { WeightServer } from './weight-server';

export { IpcBucket, WeightTransferUnavailableError };
export type { WeightPlaneConfig };

/**
 * The agent's half of weight synchronisation (paper §5.2.1, §5.2.2). The registry decides who pulls what
 * from whom; this carries it out on the machine, by concern:
 *   - trainer (weight-publisher.ts): a rank's framework writes its shard of a version into a named
 *     `/dev/shm` region (or device memory) and calls `publish`; the agent maps it (zero copy), checksums
 *     each bucket and publishes the manifest — buckets, named tensors, which shard of how many;
 *   - rollout (pull-executor.ts, pull-staging.ts): each WeightPullAssigned addressed here GETs one bucket
 *     of one shard into that shard's staging region (a `/dev/shm` file per (version, shard), or a device
 *     target), verifies it and reports; the framework loads a version once every shard is whole (`latest`);
 *   - both serve what they hold through the UCX weight server (weight-server.ts), per (version, shard),
 *     to the pullers the registry assigned (serving-grants.ts), so a rollout relays from its first bucket.
 * Without the native UCX module every entry point refuses with the module's reason.
 */
export class WeightPlane {
  private readonly logger: Logger;
  private worker?: UcxWorker;
  private weightServer?: WeightServer;
  private links?: SourceLinks;
  private subscription?: Subscription;
  private readonly copies = new HeldCopies();
  private readonly released = new Set<number>();
  private queue: Promise<void> = Promise.resolve();
  private readonly startedAt = Date.now();
  private stopping = false;
  private readonly staging: PullStaging;
  private readonly publisher: WeightPublisher;
  private readonly puller: PullExecutor;
  private readonly serving: ServingGrants;
  address: string | null = null;

  constructor(
    private readonly config: WeightPlaneConfig,
    private readonly bus: MessageBus,
    emit: Emit,
  ) {
    this.logger = new Logger(`weights/${config.machineId}`);
    // With identity on: opens the pull grants sealed for this machine.
    const grants = config.machineKey ? new PullGrantOpener(config.machineKey) : undefined;
    const ctx: PlaneContext = {
      config,
      logger: this.logger,
      copies: this.copies,
      ready: () => this.ready(),
      server: () => this.weightServer,
      stopping: () => this.stopping,
      release: (copy: HeldCopy) => this.staging.release(copy),
    };
    this.staging = new PullStaging(ctx);
    this.publisher = new WeightPublisher(ctx, emit, this.released);
    const vouchers = config.machineKey ? new VoucherCheck(config.machineKey) : undefined;
    this.puller = new PullExecutor(ctx, this.staging, () => this.links!, emit, grants, vouchers);
    this.serving = new ServingGrants(config.machineId, this.logger, grants, config.limits.catalogWaitMs, () => this.stopping);
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
    this.staging.removeStale();
    const cudaDevice = this.resolveCudaDevice();
    this.worker = new UcxWorker(cudaDevice === null ? {} : { cudaDevice });
    this.weightServer = new WeightServer(this.worker, (request) => this.serving.grantFor(request));
    const advertised = await ipv4Of(this.config.advertiseHost);
    this.address = this.weightServer.listen(this.config.bindHost ?? advertised, this.config.port, advertised);
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
    this.weightServer?.close();
    for (const copy of this.copies.all()) this.staging.release(copy);
    this.copies.clear();
    this.staging.clear();
    this.worker?.close();
  }

  // ── trainer side (weight-publisher.ts) ─────────────────────────────────────────────────────────
  /** A rank's shard of `version` lies in `<shmDir>/<shmName>`, buckets back to back: map, checksum, serve, publish (paper §5.2.1 ➀). */
  publish(req: Publication & { shmName: string; bucketSizes: number[] }) {
    return this.publisher.publish(req);
  }

  /** A rank's shard of `version` lies in device memory, one CUDA IPC handle per bucket. */
  publishDevice(req: Publication & { buckets: IpcBucket[] }) {
    return this.publisher.publishDevice(req);
  }

  /** The trainer process died: stop serving what it published at once (paper §5.2.2). */
  withdrawPublished(reason: string): Promise<void> {
    return this.publisher.withdraw(reason);
  }

  // ── rollout side (pull-staging.ts, pull-executor.ts) ───────────────────────────────────────────
  /** Device buffers a rollout framework registers to receive versions into. */
  registerTarget(req: { name: string; buckets: IpcBucket[] }): { name: string; buckets: number; totalBytes: number; memoryType: MemoryType } {
    return this.staging.registerTarget(req);
  }

  /** The framework takes a target's buffers back (a shard held there is no longer served). */
  removeTarget(name: string): boolean {
    return this.staging.removeTarget(name);
  }

  /** This machine changes role (lent to the trainer): its rollout copies are no longer served. */
  dropPulled(reason: string): Promise<void> {
    return this.staging.dropPulled(reason);
  }

  // ── queries for the framework ──────────────────────────────────────────────────────────────────
  status() {
    return {
      available: this.available,
      reason: this.available ? null : this.unavailableReason,
      address: this.address,
      versions: this.copies.all().map((c) => ({
        version: c.version,
        shard: c.shard,
        shards: c.count,
        kind: c.kind,
        path: c.path,
        target: c.target,
        memoryType: c.memoryType,
        heldBuckets: c.held.size,
        totalBuckets: c.buckets.length,
        complete: isComplete(c),
        trainerReleased: this.released.has(c.version),
      })),
    };
  }

  /** The newest version this machine holds whole — every shard — for the framework to load (paper §5.2.1 ➃). */
  latest() {
    this.ready();
    return this.copies.latest();
  }

  /**
   * One version as this machine holds it. A version of one shard answers as it always did; one of
   * several sums its shards (`complete` only with every shard whole) and lists them in `parts`.
   */
  versionStatus(version: number) {
    const mine = this.status().versions.filter((v) => v.version === version);
    const trainerReleased = this.released.has(version);
    if (mine.length === 0) return { version, trainerReleased, heldBuckets: 0 };
    if (mine.length === 1 && mine[0].shards === 1) return mine[0];
    return {
      version,
      shards: mine[0].shards,
      heldBuckets: mine.reduce((n, v) => n + v.heldBuckets, 0),
      totalBuckets: mine.reduce((n, v) => n + v.totalBuckets, 0),
      complete: this.copies.wholeVersion(version) !== undefined,
      trainerReleased,
      parts: mine,
    };
  }

  // ── the weights topic ──────────────────────────────────────────────────────────────────────────
  private async onWeightMessage(delivery: Delivery<WeightInput>): Promise<void> {
    const m = delivery.message;
    if (m.jobId !== this.config.jobId || this.stopping) return;
    switch (m.type) {
      case 'WeightVersionPublished': {
        // Kept, not acted on: anyone on the topic can publish a manifest. Which one counts is the one whose
        // bucket has the checksum the registry's assignment names (pull-executor.ts); a copy pulled from
        // another publication is dropped then, in turn with the pulls.
        this.puller.remember(m.data);
        return;
      }
      case 'TrainerReleased':
        this.released.add(m.data.version);
        return;
      case 'WeightVersionRetired':
        return this.retire(m.data.version);
      case 'WeightPullAssigned': {
        if (m.data.sourceId === this.config.machineId) this.serving.remember(m.data);
        if (m.data.pullerId !== this.config.machineId) return;
        // Replayed from the beginning: assignments to an earlier incarnation of this machine are void
        // (the registry forgot its holdings when it registered again).
        if (Date.parse(m.occurredAt) < this.startedAt) return;
        // One bucket at a time, in order (the registry's window); the handler returns at once so the
        // subscription keeps reading (a retirement must not wait behind a slow pull).
        this.queue = this.queue.then(() => this.puller.execute(m)).catch((err) => this.logger.error(`pull ${m.data.pullId}: ${String(err)}`));
        return;
      }
    }
  }

  private async retire(version: number): Promise<void> {
    this.serving.forgetVersion(version);
    this.puller.forgetVersion(version);
    this.released.delete(version);
    await this.staging.retire(version);
  }

  private ready(): { worker: UcxWorker; server: WeightServer } {
    if (!this.worker || !this.weightServer) throw new WeightTransferUnavailableError(this.available ? 'weight plane not started' : this.unavailableReason);
    return { worker: this.worker, server: this.weightServer };
  }
}

/** UCX's listener and connections take IPv4 addresses: a host name (a pod's, `$(hostname)`) is resolved once. */
async function ipv4Of(host: string): Promise<string> {
  if (isIPv4(host)) return host;
  try {
    return (await lookup(host, { family: 4 })).address;
  } catch (err) {
    throw new Error(`ROBUSTRL_WEIGHTS_ADVERTISE_HOST '${host}' has no IPv4 address: ${(err as Error).message}`);
  }
}
