import { PullGrantOpener } from '@robustrl/bus';
import { MessageOf } from '@robustrl/contracts';
import { pullBucket } from './bucket-puller';
import { copyKey, describeShard, HeldCopy, isComplete, ShardManifest } from './held-copies';
import { Emit, PlaneContext } from './plane-context';
import { PullStaging } from './pull-staging';
import { SourceLinks } from './source-links';

/**
 * The rollout side of the weight plane (paper §5.2.1 ➁): each WeightPullAssigned addressed here GETs
 * one bucket of one shard into that shard's region, verifies it against the shard's manifest and
 * reports; the registry reads the reason of a failure (a checksum → pull again; anything else blames
 * the source → go elsewhere). A version is whole here once every one of its shards is.
 */
export class PullExecutor {
  /** The newest publication of each (version, shard) the weights topic carried. */
  readonly manifests = new Map<string, ShardManifest>();

  constructor(
    private readonly ctx: PlaneContext,
    private readonly staging: PullStaging,
    private readonly links: () => SourceLinks,
    private readonly emit: Emit,
    /** With identity on: opens the pull grants sealed for this machine. */
    private readonly grants: PullGrantOpener | undefined,
  ) {}

  manifest(version: number, shard: number): ShardManifest | undefined {
    return this.manifests.get(copyKey(version, shard));
  }

  forgetVersion(version: number): void {
    for (const [key, m] of this.manifests) if (m.version === version) this.manifests.delete(key);
  }

  async execute(a: MessageOf<'WeightPullAssigned'>): Promise<void> {
    const d = a.data;
    const { pullId, version, bucketIndex, pullerId, sourceId } = d;
    const shard = d.shard ?? 0;
    // As the registry names it: the shard only when it is not 0 (a version of one shard reads as it always did).
    const pull = { pullId, version, ...(shard !== 0 ? { shard } : {}), bucketIndex, pullerId, sourceId };
    const what = describeShard(version, shard);
    const fail = (reason: string) => this.emit('WeightPullFailed', { ...pull, reason }, a);
    const manifest = this.manifest(version, shard);
    if (!manifest) return void (await fail(`no manifest of ${what} seen by ${pullerId}`));
    const spec = manifest.buckets.find((b) => b.index === bucketIndex);
    if (!spec) return void (await fail(`${what} has no bucket ${bucketIndex}`));
    let copy: HeldCopy;
    try {
      copy = this.staging.stagingFor(manifest);
    } catch (err) {
      // E.g. /dev/shm full: say so, or the registry would wait on this pull forever.
      return void (await fail(`no staging region for ${what} on ${pullerId}: ${err instanceof Error ? err.message : String(err)}`));
    }
    let token: string | undefined;
    if (this.grants) {
      const opened = d.grant ? this.grants.open('puller', d, d.grant.forPuller) : null;
      if (!opened) return void (await fail(`pull ${pullId} carries no grant ${pullerId} can open: not from the weight registry, or not for this machine`));
      token = opened.toString('base64url');
    }
    const into = copy.places[bucketIndex];
    if (!into) return void (await fail(`${what} has no bucket ${bucketIndex} in its layout`));
    const outcome = await pullBucket(
      this.links(),
      into,
      { version, shard, bucketIndex, checksum: spec.checksum, sourceAddress: d.sourceAddress, pullId, pullerId, token },
      this.ctx.config.limits,
      () => this.ctx.stopping() || !this.ctx.copies.holds(copy),
    );
    // Retired, replaced or dropped while pulling: the copy is gone; the registry already forgot this pull.
    if (!this.ctx.copies.holds(copy)) return;
    if (!outcome.ok) {
      this.ctx.logger.warn(`pull ${pullId} from ${sourceId} failed: ${outcome.reason}`);
      return void (await fail(outcome.reason));
    }
    copy.held.add(bucketIndex);
    const { transfer } = outcome;
    if (transfer.emulated)
      this.ctx.logger.error(
        `pull ${pullId}: UCX moved ${transfer.sourceMemory} → ${transfer.localMemory} memory by software emulation (${transfer.protocol}); ` +
          'expect about 0.1 GB/s instead of hundreds. Is UCX_CUDA_IPC_ENABLE_GET_ZCOPY off, or was a worker created before its CUDA context?',
      );
    await this.emit('WeightPullCompleted', { ...pull, bytes: outcome.bytes, durationMs: outcome.durationMs, transfer }, a);
    if (isComplete(copy)) {
      const where = copy.path ?? `pull target ${copy.target}`;
      if (this.ctx.copies.wholeVersion(version))
        this.ctx.logger.log(`holds version ${version} whole (${copy.count > 1 ? `${copy.count} shards, the last` : copy.totalBytes + ' bytes'} in ${where})`);
      else this.ctx.logger.log(`holds ${what} whole (${copy.totalBytes} bytes in ${where}); the version's other shards are still coming`);
    }
  }
}
