import type { Sample } from './cluster-model';

/**
 * The samples waiting for a rollout, oldest first, kept apart by the weights they need (the step whose
 * weights generate them). A dispatch hands out the oldest samples that some free rollout can take;
 * samples needing weights no free rollout holds yet only wait on. With one queue, every dispatch — one
 * per completed sample — walked past all of those (a whole batch waiting for the next weights), and
 * rebuilt the queue: O(batch) per sample, quadratic in the job. Here a dispatch touches
 * only what it hands out or drops; the oldest-first order is kept across the queues by a sequence number.
 */
export class WaitingSamples {
  private readonly byNeed = new Map<number, Fifo>();
  private seq = 0;
  private count = 0;

  get length(): number {
    return this.count;
  }

  push(sample: Sample, need: number): void {
    let q = this.byNeed.get(need);
    if (!q) this.byNeed.set(need, (q = new Fifo()));
    q.push(sample, this.seq++);
    this.count++;
  }

  /** Takes the oldest waiting sample that needs weights of step `most` or older, if any. */
  takeOldestUpTo(most: number): Sample | undefined {
    let oldest: Fifo | undefined;
    for (const [need, q] of this.byNeed) if (need <= most && q.size > 0 && (!oldest || q.frontSeq() < oldest.frontSeq())) oldest = q;
    if (!oldest) return undefined;
    this.count--;
    return oldest.shift();
  }

  clear(): void {
    this.byNeed.clear();
    this.count = 0;
  }
}

/** A first-in first-out queue with a moving front, compacted once the consumed prefix outweighs the rest. */
class Fifo {
  private samples: Sample[] = [];
  private seqs: number[] = [];
  private head = 0;

  get size(): number {
    return this.samples.length - this.head;
  }

  frontSeq(): number {
    return this.seqs[this.head];
  }

  push(sample: Sample, seq: number): void {
    this.samples.push(sample);
    this.seqs.push(seq);
  }

  shift(): Sample {
    const s = this.samples[this.head++];
    if (this.head > 1024 && this.head * 2 > this.samples.length) {
      this.samples = this.samples.slice(this.head);
      this.seqs = this.seqs.slice(this.head);
      this.head = 0;
    }
    return s;
  }
}
