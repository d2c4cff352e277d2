import { createHash } from 'node:crypto';

/** A chat message as far as a conversation's identity goes: who said what. */
interface Said {
  role: string;
  content: string;
}

/** The counters a fake engine answers `GET /stats` with (reset by `POST /stats/reset`; `POST /stats/forget` also empties its memory). */
export interface AffinityStats {
  requests: number;
  /** Chat requests that go on a conversation (they carry an assistant message). */
  multiTurnRequests: number;
  /** Multi-turn requests whose conversation so far this engine served: its prefix cache would hold it. */
  hits: number;
}

/**
 * What a fake engine remembers of the conversations it served, to tell whether a router sent a turn
 * back where its prefix is cached (a real engine's prefix cache, reduced to exact conversations): a
 * bounded set of hashes of `messages + the answer given`, oldest forgotten first. A request is a hit
 * when its messages less the last (the new user or tool message) hash to one of them.
 */
export class AffinityMemory {
  private readonly served = new Map<string, true>();
  private counters: AffinityStats = { requests: 0, multiTurnRequests: 0, hits: 0 };

  /**
   * Ten thousand conversations: far more than are in flight (a few hundred trajectories, each needing
   * only its latest turn), and small enough that an engine's heap — and so the CPU its collector takes —
   * does not grow run after run. A memory that grew made every configuration measured later pay more.
   */
  constructor(private readonly capacity = 10_000) {}

  /** Count a generation request; `messages` for a chat request, null for a completions one. */
  observe(messages: readonly unknown[] | null): void {
    this.counters.requests += 1;
    if (!messages || !messages.some((m) => roleOf(m) === 'assistant')) return;
    this.counters.multiTurnRequests += 1;
    const key = conversationKey(messages.slice(0, -1));
    if (this.served.has(key)) {
      this.counters.hits += 1;
      // Touched: a conversation in use stays (LRU order is the Map's insertion order).
      this.served.delete(key);
      this.served.set(key, true);
    }
  }

  /** Remember a conversation as served: the request's messages and the answer this engine gave. */
  remember(messages: readonly unknown[], answer: string): void {
    this.served.set(conversationKey([...messages, { role: 'assistant', content: answer }]), true);
    if (this.served.size > this.capacity) this.served.delete(this.served.keys().next().value as string);
  }

  stats(): AffinityStats {
    return { ...this.counters };
  }

  /** Counters back to zero; the conversations stay remembered, as a real engine's cache would. */
  reset(): void {
    this.counters = { requests: 0, multiTurnRequests: 0, hits: 0 };
  }

  /** Every conversation forgotten and the counters at zero: a cold engine for the next configuration. */
  forget(): void {
    this.served.clear();
    this.reset();
  }
}

function roleOf(m: unknown): string {
  return typeof m === 'object' && m !== null && typeof (m as { role?: unknown }).role === 'string' ? (m as { role: string }).role : '';
}

/** Role and text only: a router may add or drop other fields on the way without changing the conversation. */
function conversationKey(messages: readonly unknown[]): string {
  const said: Said[] = messages.map((m) => {
    const content = typeof m === 'object' && m !== null ? (m as { content?: unknown }).content : undefined;
    return { role: roleOf(m), content: typeof content === 'string' ? content : JSON.stringify(content ?? null) };
  });
  return createHash('sha1').update(JSON.stringify(said)).digest('base64');
}
