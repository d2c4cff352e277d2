/** `unauthenticated`: valid, but not signed by whom it speaks for (identity/verifiers.ts). */
export type DeadLetterKind = 'invalid' | 'handler-failed' | 'unauthenticated';

/** Dead letters one bus wrote, for one original topic and reason. */
export interface DeadLetterCount {
  /** The topic the bad record was on (as the bus names it, without a deployment's prefix). */
  topic: string;
  reason: DeadLetterKind;
  count: number;
}

/**
 * What each adapter counts as it writes dead letters (metrics: `robustrl_bus_dead_letters_total`). A record
 * another consumer group already dead-lettered (the store's ledger) is not counted again here: counted is
 * what this bus wrote.
 */
export class DeadLetterCounter {
  private readonly counts = new Map<string, DeadLetterCount>();

  add(topic: string, reason: DeadLetterKind): void {
    const key = `${topic}\u0000${reason}`;
    const known = this.counts.get(key);
    if (known) known.count += 1;
    else this.counts.set(key, { topic, reason, count: 1 });
  }

  snapshot(): DeadLetterCount[] {
    return [...this.counts.values()].map((c) => ({ ...c }));
  }
}
