import { PullGrantOpener, VoucherCheck } from '@robustrl/bus';
import { MessageOf, publicationDigest } from '@robustrl/contracts';
import { pullBucket } from './bucket-puller';
import { copyKey, describeShard, HeldCopy, isComplete, ShardManifest, shardRefOf } from './held-copies';
import { PullStaging } from './pull-staging';
import { Emit, PlaneContext } from './plane-context';
import { SourceLinks } from './source-links';

/** Publications kept per (version, shard): the trainer's and a few others (a restarted rank, a rogue's). */
const MANIFESTS_KEPT = 4;

/**
 * The rollout side of the weight plane (paper §5.2.1 ➁): each WeightPullAssigned addressed here GETs
 * one bucket of one shard into that shard's region, verifies it against the shard's manifest and
 * reports; the registry reads the reason of a failure (a checksum → pull again; anything else blames
 * the source → go elsewhere). A version is whole here once every one of its shards is.
 *
 * Which publication of a (version, shard) counts is the registry's to say, not the last manifest read:
 * the registry makes a version live only from the job's trainers and names the digest of the accepted
 * publication (contracts' publicationDigest) in each assignment — with identity on, under a tag only it
 * and this machine can make. The kept manifest with that digest lays out the copy, names its tensors and
 * gives the checksum; a copy laid out from another publication is dropped first (a rank that published
 * the version again with other content).
 */
export class PullExecutor {
  /** The publications of each (version, shard) the weights topic carried, with their digests, oldest first. */
  private readonly manifests = new Map<string, { manifest: ShardManifest; digest: string }[]>();

  constructor(
    private readonly ctx: PlaneContext,
    private readonly staging: PullStaging,
    private readonly links: () => SourceLinks,
    private readonly emit: Emit,
    /** With identity on: opens the pull grants sealed for this machine. */
    private readonly grants: PullGrantOpener | undefined,
    /** With identity on: checks the registry's tag over an assignment's publication digest. */
    private readonly vouchers?: VoucherCheck,
  ) {}

  /** Keeps a publication of (version, shard); past MANIFESTS_KEPT the oldest go. */
  remember(manifest: ShardManifest): void {
    const key = copyKey(manifest.version, shardRefOf(manifest).index);
    const digest = publicationDigest(manifest);
    const kept = (this.manifests.get(key) ?? []).filter((k) => k.digest !== digest);
    this.manifests.set(key, [...kept, { manifest, digest }].slice(-MANIFESTS_KEPT));
  }

  /** The publication of (version, shard) with `digest`, or the newest when the assignment names none (a registry from before). */
  manifest(version: number, shard: number, digest?: string): ShardManifest | undefined {
    const kept = this.manifests.get(copyKey(version, shard)) ?? [];
    return (digest === undefined ? kept.at(-1) : kept.find((k) => k.digest === digest))?.manifest;
  }

  forgetVersion(version: number): void {
    for (const [key, kept] of this.manifests) if (kept[0]?.manifest.version === version) this.manifests.delete(key);
  }

  async execute(a: MessageOf<'WeightPullAssigned'>): Promise<void> {
    const d = a.data;
    const { pullId, version, bucketIndex, pullerId, sourceId } = d;
    const shard = d.shard ?? 0;
    // As the registry names it: the shard only when it is not 0 (a version of one shard reads as it always did).
    const pull = { pullId, version, ...(shard !== 0 ? { shard } : {}), bucketIndex, pullerId, sourceId };
    const what = describeShard(version, shard);
    const fail = (reason: string) => this.emit('WeightPullFailed', { ...pull, reason }, a);
    // With identity on, before anything is staged: the registry's grant, and its word on which publication counts.
    let token: string | undefined;
    if (this.grants) {
      const opened = d.grant ? this.grants.open('puller', d, d.grant.forPuller) : null;
      if (!opened) return void (await fail(`pull ${pullId} carries no grant ${pullerId} can open: not from the weight registry, or not for this machine`));
      token = opened.toString('base64url');
    }
    if (this.vouchers && !(d.publication && d.grant?.publicationTag && this.vouchers.holds({ ...d, publication: d.publication }, d.grant.publicationTag)))
      return void (await fail(
        `pull ${pullId} names no publication the weight registry vouched for to ${pullerId}: not from the registry, or not for this machine`,
      ));
    const manifest = this.manifest(version, shard, d.publication);
    if (!manifest) return void (await fail(`no manifest of ${what} seen by ${pullerId}${d.publication ? ` with the registry's digest ${d.publication}` : ''}`));
    const spec = manifest.buckets.find((b) => b.index === bucketIndex);
    if (!spec) return void (await fail(`${what} has no bucket ${bucketIndex}`));
    let copy: HeldCopy;
    try {
      await this.staging.dropIfSuperseded(manifest);
      copy = this.staging.stagingFor(manifest);
    } catch (err) {
      // E.g. /dev/shm full: say so, or the registry would wait on this pull forever.
      return void (await fail(`no staging region for ${what} on ${pullerId}: ${err instanceof Error ? err.message : String(err)}`));
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
