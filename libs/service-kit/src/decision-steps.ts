import { createHash, randomUUID } from 'node:crypto';
import { context, Context, ROOT_CONTEXT, Span, SpanKind, trace } from '@opentelemetry/api';
import { Delivery } from '@robustrl/bus';
import { createMessage, Draft, RobustrlMessage } from '@robustrl/contracts';
import { observe, settle, step, Stepped, tick } from '@robustrl/domain-kit';
import { extractTraceContext, injectTraceHeaders, tracer } from '@robustrl/telemetry';
import { DecidingConsumerSpec } from './deciding-types';

/** What of the consumer's spec its steps read. */
export type StepSpec<State, Event extends RobustrlMessage, Input extends Event> = Pick<
  DecidingConsumerSpec<State, Event, Input>,
  'consumer' | 'decider' | 'spanForTick' | 'completeDraft'
>;

/** Who caused an output: the input's event id (null for a tick or a host input), its job, the story it belongs to. */
export interface Cause {
  eventId: string | null;
  jobId: string;
  correlationId: string;
}

/**
 * A deciding consumer's decisions made messages (docs/contributors/delivery-guarantees.md): one step of the decider
 * per input, per tick or per host input, its drafts enveloped as `Event`s — ids derived from the input,
 * so the same input decided twice yields the same ids — inside the trace spans they belong to. Holds
 * no state: the host keeps the states and writes what is returned.
 */
export class DecisionSteps<State, Event extends RobustrlMessage = RobustrlMessage, Input extends Event = Event> {
  constructor(
    private readonly spec: StepSpec<State, Event, Input>,
    /** The consumer group (named on the `process` spans). */
    private readonly groupId: string,
  ) {}

  /** One delivered input through the decider (`step`), from `before`; throws what the decider throws. */
  onDelivery(delivery: Delivery, before: State, now: number): Stepped<State, Draft, Event> {
    const input = delivery.message as Input;
    const spans: Span[] = [];
    let parent: Context | undefined;
    // Most inputs decide nothing: the trace is continued (the producer's → `process <type>` → `decide`)
    // only for one that emits, when its first output is enveloped.
    const toEvent = (d: Draft, i: number): Event => {
      if (!parent) {
        const carrier = delivery.headers.traceparent ? delivery.headers : ((input.trace as Record<string, string> | undefined) ?? {});
        const producer = extractTraceContext(carrier);
        const processing = tracer().startSpan(
          `process ${input.type}`,
          {
            kind: SpanKind.CONSUMER,
            startTime: now,
            attributes: {
              'messaging.system': 'kafka',
              'messaging.destination.name': delivery.topic,
              'messaging.consumer.group.name': this.groupId,
              'messaging.kafka.offset': Number(delivery.offset),
              'robustrl.job_id': input.jobId,
            },
          },
          producer,
        );
        const deciding = tracer().startSpan(`decide ${this.spec.consumer}`, { kind: SpanKind.INTERNAL, startTime: now }, trace.setSpan(producer, processing));
        spans.push(deciding, processing);
        parent = trace.setSpan(trace.setSpan(producer, processing), deciding);
      }
      return context.with(parent, () => this.envelope(d, now, input, deterministicId(this.spec.consumer, input.eventId, i)));
    };
    try {
      return step(this.spec.decider, before, observe(input, now), toEvent);
    } finally {
      for (const span of spans) span.end();
    }
  }

  /** Time passing for one job: what the decider decides on a tick, settled into its state; null when it decides nothing. */
  onTick(jobId: string, state: State, now: number): Stepped<State, Draft, Event> | null {
    const drafts = this.spec.decider.decide(tick(now), state);
    if (drafts.length === 0) return null;
    const root = this.spec.spanForTick?.(drafts, now) ?? null;
    let parent: Context = ROOT_CONTEXT;
    const rootSpan = root
      ? tracer().startSpan(root.name, { kind: SpanKind.INTERNAL, startTime: root.startTime, attributes: root.attributes }, ROOT_CONTEXT)
      : null;
    if (rootSpan) parent = trace.setSpan(ROOT_CONTEXT, rootSpan);
    // Outputs of one tick are one story: they share the first one's id as correlation.
    const ids = drafts.map(() => randomUUID());
    const cause = { eventId: null, jobId, correlationId: ids[0] };
    const stepped = inSpanSync(`decide ${this.spec.consumer}`, parent, now, () =>
      settle(this.spec.decider, state, tick(now), drafts, (d, i) => this.envelope(d, now, cause, ids[i])),
    );
    rootSpan?.end(now);
    return stepped;
  }

  /** The id of an input the host observed for a job: derived from the job and `cause`, so recording it again applies it once. */
  hostInputId(jobId: string, cause: string): string {
    return deterministicId(this.spec.consumer, `${jobId}\u0000${cause}`, 0);
  }

  /** An input the host observed (id from `hostInputId`) enveloped, and decided on from `state`. */
  onHostInput(jobId: string, hostInput: Draft, id: string, state: State, now: number): { input: Input; stepped: Stepped<State, Draft, Event> } {
    const input = this.envelope(hostInput, now, { eventId: null, jobId, correlationId: id }, id) as Input;
    const stepped = step(this.spec.decider, state, observe(input, now), (d, i) => this.envelope(d, now, input, deterministicId(this.spec.consumer, id, i)));
    return { input, stepped };
  }

  /** Outputs are `Event`s: they are part of the stream this consumer's state is a fold of. */
  envelope(draft: Draft, now: number, cause: Cause, eventId: string): Event {
    const traced = injectTraceHeaders(context.active());
    const d = this.spec.completeDraft ? this.spec.completeDraft(draft) : draft;
    return createMessage(d.type, d.data as never, {
      jobId: cause.jobId,
      source: this.spec.consumer,
      occurredAt: new Date(now).toISOString(),
      causationId: cause.eventId,
      correlationId: cause.correlationId,
      eventId,
      ...(traced ? { trace: traced } : {}),
    }) as Event;
  }
}

/** Synchronous span helper: decisions are pure and synchronous, their envelopes carry the span's context. */
function inSpanSync<T>(name: string, parent: Context, startTime: number | undefined, work: () => T): T {
  const span = tracer().startSpan(name, { kind: SpanKind.INTERNAL, ...(startTime === undefined ? {} : { startTime }) }, parent);
  try {
    return context.with(trace.setSpan(parent, span), work);
  } finally {
    span.end();
  }
}

/** The same input decided twice yields the same event ids: downstream de-duplication sees one decision. */
function deterministicId(consumer: string, causeId: string, index: number): string {
  const h = createHash('sha1').update(`${consumer}\u0000${causeId}\u0000${index}`).digest();
  h[6] = (h[6] & 0x0f) | 0x50; // version 5 (name-based, SHA-1)
  h[8] = (h[8] & 0x3f) | 0x80; // RFC 4122 variant
  const hex = h.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
