/**
 * The small sorted-list, set and counter helpers the registry's index (registry-index.ts) keeps
 * its maps with: keyed collections that drop a key once it holds nothing, so an index compares equal to
 * one rebuilt from the facts.
 */

/**
 * The scheduler's tie-break between sources of equal load (as it always was: the locale's order). One
 * collator for every comparison: `localeCompare` is defined as comparing with a new default collator,
 * and looking one up per call was a visible part of keeping the idle lists sorted.
 */
const LOCALE_ORDER = new Intl.Collator();
export const byId = (a: string, b: string) => LOCALE_ORDER.compare(a, b);

export function sortedIndex(list: readonly string[], id: string, order: (a: string, b: string) => number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (order(list[mid], id) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function insertSorted<K>(lists: Map<K, string[]>, key: K, id: string): void {
  let list = lists.get(key);
  if (!list) lists.set(key, (list = []));
  const at = sortedIndex(list, id, byId);
  if (list[at] !== id) list.splice(at, 0, id);
}

export function removeSorted<K>(lists: Map<K, string[]>, key: K, id: string): void {
  const list = lists.get(key);
  if (!list) return;
  const at = sortedIndex(list, id, byId);
  if (list[at] === id) list.splice(at, 1);
  if (list.length === 0) lists.delete(key);
}

export function add<K, V>(sets: Map<K, Set<V>>, key: K, value: V): void {
  let set = sets.get(key);
  if (!set) sets.set(key, (set = new Set()));
  set.add(value);
}

export function remove<K, V>(sets: Map<K, Set<V>>, key: K, value: V): void {
  const set = sets.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) sets.delete(key);
}

export function push<K, V>(lists: Map<K, V[]>, key: K, value: V): void {
  const list = lists.get(key);
  if (list) list.push(value);
  else lists.set(key, [value]);
}

export function count<K>(counts: Map<K, number>, key: K, by: number): number {
  const n = (counts.get(key) ?? 0) + by;
  if (n === 0) counts.delete(key);
  else counts.set(key, n);
  return n;
}
