import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import { encodeMessage, RobustrlMessage, topicOf } from '@robustrl/contracts';
import { extractTraceContext, injectTraceHeaders, SpanKind, tracer } from '@robustrl/telemetry';
import type { RecordSigner } from './identity/record-identity';

/** Header names every robustrl record carries, so `kcat` users can filter without parsing JSON. */
export const RecordHeaders = {
  type: 'robustrl-type',
  schemaVersion: 'robustrl-schema-version',
  contentType: 'content-type',
  traceparent: 'traceparent',
  tracestate: 'tracestate',
} as const;

export interface OutboundRecord {
  topic: string;
  key: string;
  value: Buffer;
  headers: Record<string, string>;
}

/**
 * Encode messages for the wire, each under its own `send <type>` producer span: a child of the trace the
 * message already carries (a decision enveloped it inside its span; an outbox relays it later), else of
 * whatever span is active (e.g. the consumer span of the event that caused it). The span's context
 * rides in the `traceparent` header and in the envelope, so the event log keeps it too. The spans
 * end when `send` (the adapter's durable write) has finished, so they measure its latency.
 */
export async function publishTraced(
  messages: readonly RobustrlMessage[],
  send: (records: OutboundRecord[]) => Promise<void>,
  signer?: RecordSigner,
): Promise<void> {
  if (messages.length === 0) return;
  const active = context.active();
  const parents = messages.map((m) => (m.trace ? extractTraceContext(m.trace as unknown as Record<string, string>) : active));
  const spans = messages.map((m, i) =>
    tracer().startSpan(
      `send ${m.type}`,
      {
        kind: SpanKind.PRODUCER,
        attributes: { 'messaging.system': 'kafka', 'messaging.destination.name': topicOf(m.type), 'robustrl.job_id': m.jobId },
      },
      parents[i],
    ),
  );
  const records = messages.map((message, i): OutboundRecord => {
    const traceHeaders = injectTraceHeaders(trace.setSpan(parents[i], spans[i]));
    const traced = traceHeaders ? { ...message, trace: traceHeaders } : message;
    const topic = topicOf(message.type);
    const value = encodeMessage(traced as RobustrlMessage);
    return {
      topic,
      key: message.jobId,
      value,
      headers: {
        [RecordHeaders.type]: message.type,
        [RecordHeaders.schemaVersion]: String(message.schemaVersion),
        [RecordHeaders.contentType]: 'application/json',
        ...(traceHeaders ?? {}),
        // Over the bytes as sent (the trace included), so a consumer checks exactly what it reads.
        ...(signer ? signer.sign({ topic, key: message.jobId, value }, message) : {}),
      },
    };
  });
  try {
    await send(records);
  } catch (err) {
    for (const span of spans) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    }
    throw err;
  } finally {
    for (const span of spans) span.end();
  }
}
