import { basename } from 'node:path';
import { DataOf } from '@robustrl/contracts';
import { MemoryRegion, MemoryType } from '@robustrl/ucx';
import { BucketSpan } from './bucket-layout';
import { BucketPlace } from './weight-server';

/** One publication as the weights topic carried it: one trainer rank's shard of a version. */
export type ShardManifest = DataOf<'WeightVersionPublished'>;

/** Which shard a publication is, and of how many (absent on the wire: the only one). */
export const shardRefOf = (m: Pick<ShardManifest, 'shard'>) => m.shard ?? { index: 0, count: 1 };

/**
 * One shard of a version in this machine's memory: published by a local trainer rank, or pulled
 * (possibly still partial). Its buckets lie in one `/dev/shm` region (`path`) or each in device memory
 * the framework handed over as a CUDA IPC handle (a trainer's published buckets, or a rollout's pull
 * `target`). A version of several shards is several copies, one region each (docs/integrators/weights.md).
 */
export interface HeldCopy {
  version: number;
  shard: number;
  /** Shards that make the version whole (its publications' `shard.count`). */
  count: number;
  kind: 'published' | 'pulled';
  /** The `/dev/shm` file, or null for a shard in device buffers. */
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
  /** The publication it holds: the checksums its buckets are verified against, and its named tensors. */
  manifest: ShardManifest;
}

export const copyKey = (version: number, shard: number) => `${version}/${shard}`;
/** How a log line or a refusal names a shard: shard 0 of a version of one shard reads as the version. */
export const describeShard = (version: number, shard: number) => (shard === 0 ? `version ${version}` : `version ${version} shard ${shard}`);
export const isComplete = (c: HeldCopy) => c.held.size === c.buckets.length;

/** The copies on this machine, by (version, shard). */
export class HeldCopies {
  private readonly copies = new Map<string, HeldCopy>();

  get(version: number, shard: number): HeldCopy | undefined {
    return this.copies.get(copyKey(version, shard));
  }
  set(copy: HeldCopy): void {
    this.copies.set(copyKey(copy.version, copy.shard), copy);
  }
  delete(copy: HeldCopy): void {
    if (this.copies.get(copyKey(copy.version, copy.shard)) === copy) this.copies.delete(copyKey(copy.version, copy.shard));
  }
  /** Whether `copy` is still the one held for its (version, shard): a retired or replaced one is not. */
  holds(copy: HeldCopy): boolean {
    return this.copies.get(copyKey(copy.version, copy.shard)) === copy;
  }
  all(): HeldCopy[] {
    return [...this.copies.values()].sort((a, b) => a.version - b.version || a.shard - b.shard);
  }
  ofVersion(version: number): HeldCopy[] {
    return this.all().filter((c) => c.version === version);
  }
  clear(): void {
    this.copies.clear();
  }

  /** Every one of the version's shards, each held whole, in shard order; undefined while any is missing. */
  wholeVersion(version: number): HeldCopy[] | undefined {
    const copies = this.ofVersion(version);
    const count = copies[0]?.count;
    if (count === undefined || copies.length !== count || !copies.every((c, i) => c.shard === i && c.count === count && isComplete(c))) return undefined;
    return copies;
  }

  /**
   * The newest version held whole, as the framework loads it (paper §5.2.1 ➃): `parts` names every
   * shard's region with its bucket layout and named tensors — what a vLLM worker extension reads
   * (clients/python/robustrl/vllm_extension.py). A version of one shard keeps the fields it always had;
   * a version of several has no single region, so `path` and `target` are null there (read `parts`).
   */
  latest() {
    const versions = [...new Set(this.all().map((c) => c.version))].sort((a, b) => b - a);
    for (const version of versions) {
      const parts = this.wholeVersion(version);
      if (!parts) continue;
      const first = parts[0];
      const single = parts.length === 1;
      return {
        version,
        step: first.manifest.step,
        kind: first.kind,
        path: single ? first.path : null,
        target: single ? first.target : null,
        memoryType: parts.find((c) => c.memoryType !== 'host')?.memoryType ?? 'host',
        totalBytes: parts.reduce((n, c) => n + c.totalBytes, 0),
        buckets: single ? first.manifest.buckets : [],
        shards: parts.length,
        parts: parts.map((c) => ({
          shard: c.shard,
          path: c.path,
          shmName: c.path === null ? null : basename(c.path),
          target: c.target,
          bucketSizes: c.buckets.map((b) => b.sizeBytes),
          // Where each bucket starts in the shard's region (buckets back to back): the tensors' offsets count from these.
          bucketStarts: c.buckets.map((b) => b.offset),
          tensors: c.manifest.tensors ?? null,
        })),
      };
    }
    return null;
  }
}
