/**
 * The simulator's agenda: actions ordered by virtual time, ties broken by insertion order (so a run
 * never depends on heap internals). A binary heap: O(log n) per push/pop for a few hundred thousand events.
 */
export class EventQueue<T> {
  private readonly heap: Array<{ at: number; seq: number; item: T }> = [];
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  // Sifting moves the other nodes into the hole and writes the node once at the end: the same heap as
  // swapping at every level, without the swaps (the agenda holds tens of thousands of actions at
  // 10,000 GPUs, and its pushes and pops showed in profiles).
  push(at: number, item: T): void {
    const node = { at, seq: this.seq++, item };
    const h = this.heap;
    let i = h.length;
    h.push(node);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(node, h[p])) break;
      h[i] = h[p];
      i = p;
    }
    h[i] = node;
  }

  peekTime(): number | undefined {
    return this.heap[0]?.at;
  }

  pop(): { at: number; item: T } | undefined {
    const h = this.heap;
    if (h.length === 0) return undefined;
    const top = h[0];
    const last = h.pop()!;
    const n = h.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = -1;
        let best = last;
        if (l < n && before(h[l], best)) {
          m = l;
          best = h[l];
        }
        if (r < n && before(h[r], best)) m = r;
        if (m < 0) break;
        h[i] = h[m];
        i = m;
      }
      h[i] = last;
    }
    return top;
  }
}

function before(a: { at: number; seq: number }, b: { at: number; seq: number }): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
