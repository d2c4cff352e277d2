/**
 * Kafka's default partitioner: murmur2 of the key, positive, modulo the partition count. Matching it
 * means a job lands on the same partition number in both adapters. Null keys go to partition 0.
 */
export function partitionFor(key: string | null, partitions: number): number {
  if (key === null) return 0;
  return (murmur2(Buffer.from(key, 'utf8')) & 0x7fffffff) % partitions;
}

function murmur2(data: Buffer): number {
  const m = 0x5bd1e995;
  const r = 24;
  let h = 0x9747b28c ^ data.length;
  const len4 = data.length >> 2;
  for (let i = 0; i < len4; i++) {
    const i4 = i << 2;
    let k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24);
    k = Math.imul(k, m);
    k ^= k >>> r;
    k = Math.imul(k, m);
    h = Math.imul(h, m);
    h ^= k;
  }
  const left = data.length & 3;
  const tail = data.length - left;
  if (left === 3) h ^= data[tail + 2] << 16;
  if (left >= 2) h ^= data[tail + 1] << 8;
  if (left >= 1) {
    h ^= data[tail];
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}
