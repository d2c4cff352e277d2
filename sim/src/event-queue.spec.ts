import { EventQueue } from './event-queue';

describe('EventQueue', () => {
  it('pops by time, ties in insertion order, however pushes and pops interleave', () => {
    let seed = 7;
    const rnd = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
    const q = new EventQueue<number>();
    const pending: Array<{ at: number; n: number }> = [];
    const popped: number[] = [];
    const expected: number[] = [];
    let n = 0;
    for (let i = 0; i < 20_000; i++) {
      if (rnd() < 0.55 || pending.length === 0) {
        const at = Math.floor(rnd() * 50);
        q.push(at, n);
        pending.push({ at, n: n++ });
      } else {
        // The earliest pending, the first pushed of those.
        let k = 0;
        for (let j = 1; j < pending.length; j++) if (pending[j].at < pending[k].at) k = j;
        expected.push(pending.splice(k, 1)[0].n);
        popped.push(q.pop()!.item);
      }
    }
    expect(popped).toEqual(expected);
    expect(q.size).toBe(pending.length);
  });
});
