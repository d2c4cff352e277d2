/**
 * Forget a map's oldest entries (its insertion order) once it holds more than `limit`: down to `limit`
 * less a hundredth of it, in one pass. Evicting the single oldest entry on every insertion is a trap on
 * V8: iterating a Map from its start passes over every entry deleted before (the table is compacted only
 * when it grows), so each eviction scanned further than the last — 25 µs a request at 100,000 sticky
 * trajectories, more than the rest of an unrecorded request's routing (docs/benchmarks.md "The router
 * on every request"). In batches the scan happens once per hundredth of `limit` insertions.
 */
export function evictOldest<K, V>(map: Map<K, V>, limit: number, forget: (key: K) => void = (key) => void map.delete(key)): void {
  if (map.size <= limit) return;
  let excess = map.size - limit + Math.floor(limit / 100);
  for (const key of map.keys()) {
    if (excess-- <= 0) break;
    forget(key);
  }
}
