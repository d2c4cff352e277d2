import { z } from 'zod';

/**
 * The envelope every robustrl message travels in, on Kafka and in the event log alike.
 *
 * Time is an ISO-8601 string (not a Date) and positions are strings (not bigints) because both must
 * survive JSON and JSON Schema unchanged; zod cannot express Date or bigint in JSON Schema.
 */
export const TraceContext = z
  .object({
    /** W3C trace context header, `00-<trace-id>-<span-id>-<flags>`. */
    traceparent: z.string().regex(/^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/),
    tracestate: z.string().optional(),
  })
  .meta({ id: 'TraceContext', description: 'W3C trace context of the span that produced the message' });
export type TraceContext = z.infer<typeof TraceContext>;

export const MessageKind = z.enum(['event', 'command']);
export type MessageKind = z.infer<typeof MessageKind>;

export const EnvelopeFields = {
  /** Unique per message; consumers de-duplicate on it. For commands it is the command id. */
  eventId: z.uuid(),
  type: z.string().min(1),
  schemaVersion: z.int().positive(),
  kind: MessageKind,
  /** Kafka record key: all of one job's messages share a partition, so they keep their order. */
  jobId: z.string().min(1).max(200),
  /** The emitting component, e.g. `detector` or `agent/host-17`. */
  source: z.string().min(1).max(200),
  occurredAt: z.iso.datetime({ offset: true }),
  /** The message that caused this one (null for an external observation). */
  causationId: z.string().min(1).nullable(),
  /** Shared by every message of one story, e.g. one fault from detection to reconnect. */
  correlationId: z.string().min(1),
  trace: TraceContext.optional(),
};

/** The envelope alone, with `data` unchecked: what a reader can rely on before it knows the type. */
export const AnyEnvelope = z.object({ ...EnvelopeFields, data: z.unknown() }).meta({ id: 'Envelope' });
export type AnyEnvelope = z.infer<typeof AnyEnvelope>;
