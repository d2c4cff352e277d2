import { MessageCatalog } from '../catalog';
import { TensorDtype, tensorBytes } from './weights';

/** What a named, sharded publication must hold to be trusted (docs/integrators/weights.md: what a manifest holds). */
describe('WeightVersionPublished: named tensors and shards', () => {
  const schema = MessageCatalog.WeightVersionPublished.data;
  const base = {
    version: 3,
    step: 3,
    buckets: [
      { index: 0, sizeBytes: 512, checksum: 'sha256:a' },
      { index: 1, sizeBytes: 256, checksum: 'sha256:b' },
    ],
    totalBytes: 768,
    sources: [{ instanceId: 'trainer-1', address: '10.0.0.2:13337' }],
  };
  const tensor = (name: string, bucket: number, offset: number, shape = [8, 8], dtype: TensorDtype = 'float32') => ({ name, dtype, shape, bucket, offset });
  const problems = (data: unknown) => {
    const r = schema.safeParse(data);
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };

  it('an event without tensors or shard is the single publisher it always was', () => {
    expect(problems(base)).toEqual([]);
  });

  it('accepts tensors inside their buckets and a shard inside its count', () => {
    expect(
      problems({
        ...base,
        tensors: [tensor('a.weight', 0, 0), tensor('a.bias', 0, 256, [64]), tensor('b', 1, 0, [128], 'bfloat16')],
        shard: { index: 1, count: 2 },
      }),
    ).toEqual([]);
    // A 0-d tensor is one element; a tensor with a zero dimension takes no bytes, even at a bucket's end.
    expect(tensorBytes({ dtype: 'int64', shape: [] })).toBe(8);
    expect(problems({ ...base, tensors: [tensor('empty', 1, 256, [0, 4])] })).toEqual([]);
  });

  it('refuses a tensor outside its bucket, in a bucket that does not exist, or named twice', () => {
    expect(problems({ ...base, tensors: [tensor('a', 1, 4)] })).toEqual(['tensors.0.offset: tensor a: bytes 4..260 lie outside bucket 1 of 256 bytes']);
    expect(problems({ ...base, tensors: [tensor('a', 2, 0)] })).toEqual(['tensors.0.bucket: tensor a: bucket 2 does not exist (2 buckets)']);
    expect(problems({ ...base, tensors: [tensor('a', 0, 0), tensor('a', 1, 0)] })).toEqual(['tensors.1.name: tensor a appears twice in the publication']);
    expect(problems({ ...base, tensors: [{ ...tensor('a', 0, 0), dtype: 'complex64' }] })).toHaveLength(1);
    expect(problems({ ...base, tensors: [tensor('', 0, 0)] })).toHaveLength(1);
    expect(problems({ ...base, tensors: [tensor('x'.repeat(501), 0, 0)] })).toHaveLength(1);
    expect(problems({ ...base, tensors: [tensor('a', 0, 0, [-1])] })).toHaveLength(1);
  });

  it('refuses a shard index at or above its count, and a count below one', () => {
    expect(problems({ ...base, shard: { index: 2, count: 2 } })).toEqual(['shard.index: shard 2 of 2: the index must be below the count']);
    expect(problems({ ...base, shard: { index: 0, count: 0 } })).toHaveLength(2);
  });

  it('pulls name their shard, absent meaning shard 0', () => {
    const pull = { pullId: 'w3/s1/b0/r-0#1', version: 3, bucketIndex: 0, pullerId: 'r-0', sourceId: 'trainer-1', sourceAddress: '10.0.0.2:13337' };
    expect(MessageCatalog.WeightPullAssigned.data.safeParse(pull).success).toBe(true);
    expect(MessageCatalog.WeightPullAssigned.data.safeParse({ ...pull, shard: 1 }).success).toBe(true);
    expect(MessageCatalog.WeightPullFailed.data.safeParse({ ...pull, shard: -1, reason: 'x' }).success).toBe(false);
    expect(MessageCatalog.WeightPullCompleted.data.safeParse({ ...pull, shard: 1, bytes: 1, durationMs: 1 }).success).toBe(true);
  });
});
