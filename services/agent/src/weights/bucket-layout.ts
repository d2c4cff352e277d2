/**
 * A weight version in memory is one contiguous region; its buckets (layer groups, paper §5.2.1 ➁) lie
 * back to back in index order. Trainer, relays and pullers all use this layout, so a bucket's offset
 * follows from the manifest's sizes alone and a puller GETs it straight into the same offset.
 */
export interface BucketSpan {
  index: number;
  offset: number;
  sizeBytes: number;
}

export function bucketLayout(sizes: readonly number[]): { buckets: BucketSpan[]; totalBytes: number } {
  let offset = 0;
  const buckets = sizes.map((sizeBytes, index) => {
    if (!Number.isSafeInteger(sizeBytes) || sizeBytes < 0) throw new RangeError(`bucket ${index}: size must be a non-negative integer, got ${sizeBytes}`);
    const span = { index, offset, sizeBytes };
    offset += sizeBytes;
    return span;
  });
  return { buckets, totalBytes: offset };
}
