import { RobustrlMessage, Topics } from '@robustrl/contracts';
import { createEttrProjection, ETTR_INPUT_TYPES, EttrInput, EttrSettings, EttrView, viewAt } from '@robustrl/ettr';
import type { Projection } from '@robustrl/domain-kit';

/**
 * How the per-job views wait for the topics to line up (see EttrJobs).
 */
export interface EventOrdering {
  /**
   * A job's stream on one topic that has delivered nothing for this long (wall time) no longer holds
   * the others back: it has caught up, or has nothing more to say for now. Also how long a newly seen
   * job waits before anything is folded, so that each topic can show its first records.
   */
  quietMs: number;
  /** Event-time slack behind the slowest active stream: absorbs publish latency and clock skew between producers. */
  slackMs: number;
  /** Per job: above this many waiting events the oldest are folded anyway (a producer with a clock far behind must not grow memory without bound). */
  maxPending: number;
  /** Per job: event ids remembered for de-duplication (redeliveries and outbox re-relays arrive close to the original). */
  dedupeWindow: number;
}

export const DEFAULT_EVENT_ORDERING: EventOrdering = { quietMs: 10_000, slackMs: 2_000, maxPending: 50_000, dedupeWindow: 4_096 };

/**
 * Ties in time between topics: what a job's producers do in one instant happens membership first
 * (the machine exists), then the verdict, the decision and the commands on it, then the phase the
 * (restarted) machine reports, then training progress. Within one topic the bus order stands.
 */
const TOPIC_RANK: Readonly<Record<string, number>> = {
  [Topics.membership]: 0,
  [Topics.verdicts]: 1,
  [Topics.control]: 2,
  [Topics.replies]: 2,
  [Topics.telemetry]: 3,
  [Topics.training]: 4,
};

const INPUT_TYPES: ReadonlySet<string> = new Set(ETTR_INPUT_TYPES);
export const isEttrInput = (m: RobustrlMessage): m is EttrInput => INPUT_TYPES.has(m.type);

interface Waiting {
  at: number;
  rank: number;
  seq: number;
  message: EttrInput;
}

interface Stream {
  /** Latest event time this job's records on the topic have reached. */
  maxAt: number;
  /** Wall time (monotonic) of its latest delivery. */
  lastArrival: number;
}

interface JobLog {
  /** Folded up to `foldedUpTo` (event time); the projection mutates it in place. */
  view: EttrView;
  foldedUpTo: number;
  /** Not folded yet, in (event time, topic rank, arrival) order. */
  pending: Waiting[];
  streams: Map<string, Stream>;
  firstArrival: number;
  seen: Set<string>;
  seenRing: string[];
  seenNext: number;
  accepted: number;
  late: number;
}

export type AcceptOutcome = 'accepted' | 'late' | 'duplicate' | 'ignored';

/**
 * The ETTR views of all jobs, fed in bus order and folded in event-time order.
 *
 * The projection accounts time from one event to the next, so it needs a job's events in the order
 * they happened. The bus keeps a job's order within a topic only, and the ETTR inputs come from five
 * topics: replaying history at start, one topic's loop can be minutes (of event time) ahead of
 * another's, so e.g. a machine's first phase report would arrive before its registration and be
 * dropped. Events therefore wait per job until every stream that is still delivering has passed them
 * (a watermark: the slowest active stream's latest time, minus `slackMs`), and are then folded in time
 * order. A stream that went quiet stops holding the watermark back (it has caught up). An event older
 * than what was already folded is folded on arrival and counted as late: the projection corrects a
 * verdict's detection window backwards by itself, anything else it places at the time it arrives.
 *
 * Reads never wait: they fold the waiting events into a copy, then account up to `now`.
 */
export class EttrJobs {
  readonly projection: Projection<EttrView, EttrInput>;
  private readonly jobs = new Map<string, JobLog>();
  private readonly ordering: EventOrdering;
  private seq = 0;

  constructor(
    readonly settings: EttrSettings,
    ordering: Partial<EventOrdering> = {},
    /** Called when the projection throws on an event (the event is then skipped, never retried). */
    private readonly onError: (err: unknown, message: EttrInput) => void = () => undefined,
    /** Called on a job's first late event (to log it once, not per event). */
    private readonly onFirstLate: (jobId: string, message: EttrInput) => void = () => undefined,
  ) {
    this.ordering = { ...DEFAULT_EVENT_ORDERING, ...ordering };
    this.projection = createEttrProjection(settings);
  }

  /** One delivered message; `arrival` is a monotonic wall clock in ms. Never throws on bad data. */
  accept(message: RobustrlMessage, topic: string, arrival: number): AcceptOutcome {
    if (!isEttrInput(message)) return 'ignored';
    const at = Date.parse(message.occurredAt);
    if (!Number.isFinite(at)) return 'ignored';
    const job = this.jobOf(message.jobId, arrival);
    if (!this.remember(job, message.eventId)) return 'duplicate';
    job.accepted += 1;

    const stream = job.streams.get(topic);
    if (stream) {
      stream.maxAt = Math.max(stream.maxAt, at);
      stream.lastArrival = arrival;
    } else job.streams.set(topic, { maxAt: at, lastArrival: arrival });

    const waiting: Waiting = { at, rank: TOPIC_RANK[topic] ?? 5, seq: ++this.seq, message };
    if (at < job.foldedUpTo) {
      job.late += 1;
      if (job.late === 1) this.onFirstLate(message.jobId, message);
      this.fold(job, waiting);
      return 'late';
    }
    job.pending.splice(insertionIndex(job.pending, waiting), 0, waiting);
    this.flushJob(job, arrival);
    return 'accepted';
  }

  /** Folds what every job's watermark has passed (call periodically: quiet streams release events without a new delivery). */
  flushAll(arrival: number): void {
    for (const job of this.jobs.values()) if (job.pending.length > 0) this.flushJob(job, arrival);
  }

  jobIds(): string[] {
    return [...this.jobs.keys()].sort();
  }

  has(jobId: string): boolean {
    return this.jobs.has(jobId);
  }

  /** The job's view with everything received so far, accounted up to `now` (a copy). */
  viewOf(jobId: string, now: number): EttrView | undefined {
    const job = this.jobs.get(jobId);
    if (!job) return undefined;
    if (job.pending.length === 0) return viewAt(job.view, now);
    let copy: EttrView = structuredClone(job.view);
    for (const w of job.pending) {
      try {
        copy = this.projection.evolve(copy, w.message);
      } catch {
        // Reported when the event is folded for real; a read must not fail on it.
      }
    }
    return viewAt(copy, now);
  }

  /** Distinct events received for the job (tests wait on it). */
  accepted(jobId: string): number {
    return this.jobs.get(jobId)?.accepted ?? 0;
  }

  /** Events that arrived after later ones had been folded (a measure of how far to trust the split). */
  lateEvents(jobId: string): number {
    return this.jobs.get(jobId)?.late ?? 0;
  }

  /** Events received but not folded yet. */
  pendingEvents(jobId: string): number {
    return this.jobs.get(jobId)?.pending.length ?? 0;
  }

  private jobOf(jobId: string, arrival: number): JobLog {
    let job = this.jobs.get(jobId);
    if (!job) {
      job = {
        view: this.projection.initialView(),
        foldedUpTo: -Infinity,
        pending: [],
        streams: new Map(),
        firstArrival: arrival,
        seen: new Set(),
        seenRing: [],
        seenNext: 0,
        accepted: 0,
        late: 0,
      };
      this.jobs.set(jobId, job);
    }
    return job;
  }

  /** False for an event id seen recently: at-least-once delivery, and the projection is not idempotent (a second MachineRegistered reads as an agent restart). */
  private remember(job: JobLog, eventId: string): boolean {
    if (job.seen.has(eventId)) return false;
    job.seen.add(eventId);
    if (job.seenRing.length < this.ordering.dedupeWindow) job.seenRing.push(eventId);
    else {
      job.seen.delete(job.seenRing[job.seenNext]);
      job.seenRing[job.seenNext] = eventId;
      job.seenNext = (job.seenNext + 1) % this.ordering.dedupeWindow;
    }
    return true;
  }

  private watermark(job: JobLog, arrival: number): number {
    const { quietMs, slackMs } = this.ordering;
    if (arrival - job.firstArrival < quietMs) return -Infinity;
    let min = Infinity;
    for (const s of job.streams.values()) if (arrival - s.lastArrival < quietMs && s.maxAt < min) min = s.maxAt;
    return min - slackMs;
  }

  private flushJob(job: JobLog, arrival: number): void {
    const mark = this.watermark(job, arrival);
    let n = 0;
    while (n < job.pending.length && job.pending[n].at <= mark) n++;
    n = Math.max(n, job.pending.length - this.ordering.maxPending);
    if (n === 0) return;
    for (const w of job.pending.splice(0, n)) this.fold(job, w);
  }

  private fold(job: JobLog, w: Waiting): void {
    try {
      job.view = this.projection.evolve(job.view, w.message);
    } catch (err) {
      this.onError(err, w.message);
    }
    if (w.at > job.foldedUpTo) job.foldedUpTo = w.at;
  }
}

function before(a: Waiting, b: Waiting): boolean {
  if (a.at !== b.at) return a.at < b.at;
  if (a.rank !== b.rank) return a.rank < b.rank;
  return a.seq < b.seq;
}

/** Binary search: events mostly arrive in order, but a replay can insert far back. */
function insertionIndex(list: readonly Waiting[], w: Waiting): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(w, list[mid])) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
