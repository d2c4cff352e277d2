import { evictOldest } from './evict-oldest';

describe('evictOldest: a bounded map forgets its oldest entries a hundredth at a time', () => {
  it('keeps the newest, never more than the limit, and forgets in batches', () => {
    const map = new Map<string, number>();
    const forgotten: string[] = [];
    const forget = (key: string) => {
      forgotten.push(key);
      map.delete(key);
    };
    for (let i = 0; i < 1_000; i++) {
      map.set(`k${i}`, i);
      evictOldest(map, 1_000, forget);
    }
    expect(map.size).toBe(1_000);
    expect(forgotten).toEqual([]);
    map.set('k1000', 1_000);
    evictOldest(map, 1_000, forget);
    // Over by one: down to the limit less a hundredth, the oldest first.
    expect(forgotten).toEqual(Array.from({ length: 11 }, (_, i) => `k${i}`));
    expect(map.size).toBe(990);
    expect(map.has('k1000')).toBe(true);
    // The next ten insertions forget nothing.
    for (let i = 1_001; i <= 1_010; i++) {
      map.set(`k${i}`, i);
      evictOldest(map, 1_000, forget);
    }
    expect(forgotten.length).toBe(11);
    expect(map.size).toBe(1_000);
  });

  it('deletes from the map itself when no forget is given; a small limit forgets one at a time', () => {
    const map = new Map([
      ['a', 1],
      ['b', 2],
      ['c', 3],
    ]);
    evictOldest(map, 2);
    expect([...map.keys()]).toEqual(['b', 'c']);
    evictOldest(map, 2);
    expect([...map.keys()]).toEqual(['b', 'c']);
  });
});
