import { randomUUID } from 'node:crypto';
import { DataOf, MessageCatalog, MessageOf, MessageType } from './catalog';
import { TraceContext } from './envelope';

export interface MessageContext {
  jobId: string;
  source: string;
  /** ISO time; the caller's clock (wall clock in services, virtual clock in the simulator). */
  occurredAt: string;
  causationId?: string | null;
  correlationId?: string;
  eventId?: string;
  trace?: TraceContext;
}

/**
 * Build a message with a checked envelope. The schema parse guards against producing what our own
 * consumers would dead-letter.
 */
export function createMessage<T extends MessageType>(type: T, data: DataOf<T>, ctx: MessageContext): MessageOf<T> {
  const def = MessageCatalog[type];
  const eventId = ctx.eventId ?? randomUUID();
  const candidate = {
    eventId,
    type,
    kind: def.kind,
    schemaVersion: def.schemaVersion,
    jobId: ctx.jobId,
    source: ctx.source,
    occurredAt: ctx.occurredAt,
    causationId: ctx.causationId ?? null,
    correlationId: ctx.correlationId ?? eventId,
    ...(ctx.trace ? { trace: ctx.trace } : {}),
    data,
  };
  return def.schema.parse(candidate) as MessageOf<T>;
}

/** A message caused by another: same job and correlation, causation pointing at the cause. */
export function createCausedMessage<T extends MessageType>(
  type: T,
  data: DataOf<T>,
  cause: { eventId: string; jobId: string; correlationId: string },
  ctx: { source: string; occurredAt: string },
): MessageOf<T> {
  return createMessage(type, data, {
    jobId: cause.jobId,
    source: ctx.source,
    occurredAt: ctx.occurredAt,
    causationId: cause.eventId,
    correlationId: cause.correlationId,
  });
}
