import { createMessage, DataOf, MessageCatalog, MessageOf, MessageType, RobustrlMessage } from '@robustrl/contracts';
import { EventQueue } from '../event-queue';

/** Virtual time starts here (a fixed instant, so reports do not depend on when they were made). */
export const SIM_EPOCH_MS = Date.parse('2026-01-01T00:00:00.000Z');

export type Subscriber = (message: RobustrlMessage) => void;

/** The catalog read once (a re-exported binding is a getter: read per message, it showed in profiles). */
const CATALOG = MessageCatalog;

/**
 * The simulator's kernel: a virtual clock, an agenda of timed actions, and an in-memory bus that hands
 * every published message to its subscribers in publication order. Nothing here reads the wall clock or
 * draws random numbers, so a run is a pure function of the scenario and the seed.
 *
 * Messages get envelopes like the services' (event id, job, source, occurredAt = virtual now, causation).
 * Building them skips the schema parse for speed; `validate: true` (the specs) parses every one with the
 * contracts' zod schemas, proving the simulator speaks exactly what the services accept.
 */
export class SimKernel {
  now = SIM_EPOCH_MS;
  private readonly agenda = new EventQueue<() => void>();
  private readonly subscribers: Array<{ types: ReadonlySet<string> | null; fn: Subscriber }> = [];
  private readonly pending: RobustrlMessage[] = [];
  private delivering = false;
  private seq = 0;

  constructor(
    readonly jobId: string,
    private readonly options: { validate?: boolean } = {},
  ) {
    this.idPrefix = fnv32(jobId).toString(16).padStart(8, '0');
  }

  /** Runs `fn` at virtual time `at` (never in the past). */
  at(at: number, fn: () => void): void {
    this.agenda.push(Math.max(at, this.now), fn);
  }

  after(ms: number, fn: () => void): void {
    this.at(this.now + Math.max(0, ms), fn);
  }

  subscribe(types: readonly string[] | null, fn: Subscriber): void {
    this.subscribers.push({ types: types ? new Set(types) : null, fn });
    this.byType.clear();
  }

  /**
   * Per message type, its subscribers in the order they subscribed: asking every subscriber about every
   * message (ten million at 10,000 GPUs) showed in profiles. Subscribers come at set-up; one
   * added while a message is being delivered gets the messages published after it.
   */
  private readonly byType = new Map<string, Subscriber[]>();
  private subscribersOf(type: string): Subscriber[] {
    let list = this.byType.get(type);
    if (!list) {
      list = this.subscribers.filter((s) => !s.types || s.types.has(type)).map((s) => s.fn);
      this.byType.set(type, list);
    }
    return list;
  }

  message<T extends MessageType>(type: T, data: DataOf<T>, source: string, causationId: string | null = null): MessageOf<T> {
    const eventId = this.nextEventId();
    const occurredAt = this.nowIso();
    if (this.options.validate) return createMessage(type, data, { jobId: this.jobId, source, occurredAt, causationId, eventId });
    const def = CATALOG[type];
    return {
      eventId,
      type,
      kind: def.kind,
      schemaVersion: def.schemaVersion,
      jobId: this.jobId,
      source,
      occurredAt,
      causationId,
      correlationId: eventId,
      data,
    } as unknown as MessageOf<T>;
  }

  /**
   * `now` as the envelope's ISO time, formatted once per instant: many messages share one (a telemetry
   * round, a decision and its commands), and formatting a date per message showed in profiles.
   */
  private isoAt = NaN;
  private iso = '';
  private nowIso(): string {
    if (this.now !== this.isoAt) {
      this.iso = new Date(this.now).toISOString();
      this.isoAt = this.now;
    }
    return this.iso;
  }

  /** Event ids are UUID-shaped (the envelope requires it) and deterministic: the job's hash and a counter. */
  private idPrefix = '';
  private nextEventId(): string {
    // The counter's 15 hex digits: the first 10 change once per 16^5 ids, so their part of the id is
    // made then and kept (building every id from its 15 digits showed in profiles).
    const seq = ++this.seq;
    const high = Math.floor(seq / 0x100000);
    if (high !== this.idHigh) {
      const h = high.toString(16).padStart(10, '0');
      this.idHead = `${this.idPrefix}-${h.slice(0, 4)}-4${h.slice(4, 7)}-8${h.slice(7, 10)}-`;
      this.idHigh = high;
    }
    return `${this.idHead}${(seq % 0x100000).toString(16).padStart(5, '0')}0000000`;
  }
  private idHigh = -1;
  private idHead = '';

  /** Builds and publishes; returns the message. */
  emit<T extends MessageType>(type: T, data: DataOf<T>, source: string, causationId: string | null = null): MessageOf<T> {
    const m = this.message(type, data, source, causationId);
    this.publish(m);
    return m;
  }

  /** Delivers to every subscriber of its type, after whatever is being delivered now (FIFO, no recursion). */
  publish(message: RobustrlMessage): void {
    this.pending.push(message);
    if (this.delivering) return;
    this.delivering = true;
    try {
      for (let i = 0; i < this.pending.length; i++) {
        const m = this.pending[i];
        for (const fn of this.subscribersOf(m.type)) fn(m);
      }
    } finally {
      this.pending.length = 0;
      this.delivering = false;
    }
  }

  /** Runs the agenda until `until()` holds or nothing is left; returns false if it ran out of time. */
  run(until: () => boolean, deadline: number): boolean {
    while (!until()) {
      const next = this.agenda.pop();
      if (!next) return false;
      if (next.at > deadline) return false;
      this.now = next.at;
      next.item();
    }
    return true;
  }
}

function fnv32(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0;
  return h;
}
