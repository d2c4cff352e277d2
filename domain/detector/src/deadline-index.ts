/**
 * When each machine is next due for evaluation: a min-heap of (due time, machine) with lazy deletion,
 * beside the one current due time per machine. Rescheduling a machine pushes a new entry (O(log N))
 * and leaves the old one behind; entries no longer current are dropped when they reach the top, and
 * the heap is rebuilt once stale entries outnumber live ones (amortized O(1) per reschedule).
 *
 * Reading what is due at `now` does not change the index (decide is read-only): it walks the heap from
 * its top through entries ≤ now only, so a tick with nothing due costs O(1) and one with k due
 * entries O(k). Machines with a rule that keeps no deadline are due on every tick.
 */
export class DeadlineIndex {
  private readonly at: number[] = [];
  private readonly ids: string[] = [];
  private readonly dueOf = new Map<string, number>();
  private readonly everyTick = new Set<string>();

  /** `due`: when the machine is next due (null: not until an input); `everyTick`: due on every tick regardless. */
  schedule(id: string, due: number | null, everyTick = false): void {
    if (everyTick) this.everyTick.add(id);
    else this.everyTick.delete(id);
    const current = this.dueOf.get(id);
    if (due === null) {
      if (current !== undefined) this.dueOf.delete(id);
    } else if (current !== due) {
      this.dueOf.set(id, due);
      this.push(due, id);
    }
    this.dropStaleTop();
    if (this.at.length > 2 * this.dueOf.size + 1024) this.compact();
  }

  /** The machine's current due time (undefined: none). */
  dueAt(id: string): number | undefined {
    return this.dueOf.get(id);
  }

  /** The machines due at `now`, each once, in no particular order. */
  due(now: number): string[] {
    const out = new Set<string>(this.everyTick);
    const stack = this.at.length > 0 && this.at[0] <= now ? [0] : [];
    while (stack.length > 0) {
      const i = stack.pop()!;
      if (this.dueOf.get(this.ids[i]) === this.at[i]) out.add(this.ids[i]);
      for (const c of [2 * i + 1, 2 * i + 2]) if (c < this.at.length && this.at[c] <= now) stack.push(c);
    }
    return [...out];
  }

  /** Entries in the heap, live or stale (for benchmarks and specs). */
  get heapSize(): number {
    return this.at.length;
  }

  private dropStaleTop(): void {
    while (this.at.length > 0 && this.dueOf.get(this.ids[0]) !== this.at[0]) this.pop();
  }

  private compact(): void {
    this.at.length = 0;
    this.ids.length = 0;
    for (const [id, due] of this.dueOf) this.push(due, id);
  }

  private push(due: number, id: string): void {
    let i = this.at.length;
    this.at.push(due);
    this.ids.push(id);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.at[parent] <= due) break;
      this.at[i] = this.at[parent];
      this.ids[i] = this.ids[parent];
      i = parent;
    }
    this.at[i] = due;
    this.ids[i] = id;
  }

  private pop(): void {
    const lastAt = this.at.pop()!;
    const lastId = this.ids.pop()!;
    const n = this.at.length;
    if (n === 0) return;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const c = l + 1 < n && this.at[l + 1] < this.at[l] ? l + 1 : l;
      if (this.at[c] >= lastAt) break;
      this.at[i] = this.at[c];
      this.ids[i] = this.ids[c];
      i = c;
    }
    this.at[i] = lastAt;
    this.ids[i] = lastId;
  }
}
