import { partitionFor } from './partitioner';

describe('partitionFor', () => {
  // Expected values computed with kafka-clients 3.9.1: Utils.toPositive(Utils.murmur2(key.getBytes(UTF_8))) % n.
  it.each([
    ['a', 3, 1],
    ['job-1', 3, 2],
    ['robustrl', 12, 7],
    ['demo-20261121051547', 3, 1],
  ])('places key %s like Kafka does', (key, n, expected) => {
    expect(partitionFor(key, n)).toBe(expected);
  });

  it('keeps one key on one partition and spreads many keys', () => {
    const seen = new Set(Array.from({ length: 200 }, (_, i) => partitionFor(`job-${i}`, 3)));
    expect(seen).toEqual(new Set([0, 1, 2]));
    expect(partitionFor('job-7', 3)).toBe(partitionFor('job-7', 3));
  });
});
