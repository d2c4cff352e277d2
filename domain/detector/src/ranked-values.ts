/**
 * A multiset of numbers, one per key, ranked: an order-statistics treap ordered by (value, key), each
 * node knowing the size of its subtree. Setting a key's value is O(log N) expected; the k-th smallest
 * and the median with one key left out are O(log N). The detector ranks generating rollouts by their
 * last tokens/s with it, so a straggler check costs O(log N) a sample instead of filtering and sorting
 * every peer (O(N log N)) on every sample.
 *
 * Priorities are a hash of the key, not random numbers: the domain has no randomness, and a tree built
 * from the same keys in the same order has the same shape (so the medians are the same floats).
 */
interface RankNode {
  value: number;
  key: string;
  priority: number;
  size: number;
  left: RankNode | null;
  right: RankNode | null;
}

export class RankedValues {
  private root: RankNode | null = null;
  private readonly values = new Map<string, number>();

  get size(): number {
    return this.values.size;
  }

  has(key: string): boolean {
    return this.values.has(key);
  }

  /** Ranks `key` at `value`, or takes it out (null). */
  set(key: string, value: number | null): void {
    const old = this.values.get(key);
    if (old === value) return;
    if (old !== undefined) {
      this.root = remove(this.root, old, key);
      this.values.delete(key);
    }
    if (value !== null) {
      this.root = insert(this.root, { value, key, priority: priorityOf(key), size: 1, left: null, right: null });
      this.values.set(key, value);
    }
  }

  /** The k-th smallest value (0-based). */
  kth(k: number): number {
    let node = this.root;
    while (node) {
      const leftSize = node.left?.size ?? 0;
      if (k < leftSize) node = node.left;
      else if (k === leftSize) return node.value;
      else {
        k -= leftSize + 1;
        node = node.right;
      }
    }
    throw new RangeError(`rank ${k} out of ${this.size}`);
  }

  /** How many values there are besides `key`'s. */
  countWithout(key: string): number {
    return this.size - (this.values.has(key) ? 1 : 0);
  }

  /** The median of every value but `key`'s (NaN when there is none), as sorting them would give it. */
  medianWithout(key: string): number {
    const n = this.countWithout(key);
    if (n === 0) return NaN;
    const own = this.values.get(key);
    const skipAt = own === undefined ? Infinity : this.rankOf(own, key);
    const at = (i: number) => this.kth(i >= skipAt ? i + 1 : i);
    const mid = Math.floor(n / 2);
    return n % 2 === 1 ? at(mid) : (at(mid - 1) + at(mid)) / 2;
  }

  /** How many entries order before (value, key). */
  private rankOf(value: number, key: string): number {
    let rank = 0;
    let node = this.root;
    while (node) {
      if (before(node.value, node.key, value, key)) {
        rank += (node.left?.size ?? 0) + 1;
        node = node.right;
      } else node = node.left;
    }
    return rank;
  }
}

const before = (v1: number, k1: string, v2: number, k2: string) => v1 < v2 || (v1 === v2 && k1 < k2);
const sizeOf = (n: RankNode | null) => n?.size ?? 0;
const resize = (n: RankNode) => {
  n.size = 1 + sizeOf(n.left) + sizeOf(n.right);
};

function insert(node: RankNode | null, item: RankNode): RankNode {
  if (node === null) return item;
  if (item.priority > node.priority) {
    [item.left, item.right] = split(node, item.value, item.key);
    resize(item);
    return item;
  }
  if (before(item.value, item.key, node.value, node.key)) node.left = insert(node.left, item);
  else node.right = insert(node.right, item);
  resize(node);
  return node;
}

/** Splits into the entries before (value, key) and the rest. */
function split(node: RankNode | null, value: number, key: string): [RankNode | null, RankNode | null] {
  if (node === null) return [null, null];
  if (before(node.value, node.key, value, key)) {
    const [l, r] = split(node.right, value, key);
    node.right = l;
    resize(node);
    return [node, r];
  }
  const [l, r] = split(node.left, value, key);
  node.left = r;
  resize(node);
  return [l, node];
}

function merge(a: RankNode | null, b: RankNode | null): RankNode | null {
  if (a === null) return b;
  if (b === null) return a;
  if (a.priority > b.priority) {
    a.right = merge(a.right, b);
    resize(a);
    return a;
  }
  b.left = merge(a, b.left);
  resize(b);
  return b;
}

function remove(node: RankNode | null, value: number, key: string): RankNode | null {
  if (node === null) return null;
  if (node.value === value && node.key === key) return merge(node.left, node.right);
  if (before(value, key, node.value, node.key)) node.left = remove(node.left, value, key);
  else node.right = remove(node.right, value, key);
  resize(node);
  return node;
}

/** FNV-1a, then murmur3's finalizer so that similar keys (`rollout-0001`, `rollout-0002`) spread. */
function priorityOf(key: string): number {
  let h = 2166136261;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
