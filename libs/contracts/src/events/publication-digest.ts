import { createHash } from 'node:crypto';
import type { WeightShardRef, WeightTensor } from './weights';

/** The content of a publication: what a puller lays a copy out from and an engine loads by. */
export interface PublicationContent {
  version: number;
  shard?: WeightShardRef;
  buckets: readonly { index: number; sizeBytes: number; checksum: string }[];
  tensors?: readonly WeightTensor[];
}

/**
 * What identifies one publication's content — version, shard, every bucket's index, size and checksum,
 * and every named tensor — not who serves it or when (a restarted rank re-publishing the same bytes has
 * the same digest). The weight registry names the digest of the publication it accepted in each
 * assignment; a puller lays its copy out from the manifest with that digest, so a manifest anyone else
 * published under the same version, even one copying the trainer's checksums under other tensor names,
 * never counts. `sha256:` and base64url.
 */
export function publicationDigest(m: PublicationContent): string {
  const shard = m.shard ?? { index: 0, count: 1 };
  const canonical = JSON.stringify([
    m.version,
    shard.index,
    shard.count,
    [...m.buckets].sort((a, b) => a.index - b.index).map((b) => [b.index, b.sizeBytes, b.checksum]),
    (m.tensors ?? []).map((t) => [t.name, t.dtype, t.shape, t.bucket, t.offset]),
  ]);
  return `sha256:${createHash('sha256').update(canonical, 'utf8').digest('base64url')}`;
}
