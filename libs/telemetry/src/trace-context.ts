import { Context, context, propagation, ROOT_CONTEXT, Span, SpanKind, SpanStatusCode, TextMapGetter, TextMapSetter, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/**
 * W3C trace context across Kafka records. We use the W3C propagator directly rather than the global
 * one, so the `traceparent` header keeps flowing even in a process where no SDK is installed (the
 * no-op tracer then passes the upstream span context through unchanged).
 */
const w3c = new W3CTraceContextPropagator();
const TRACER_NAME = 'robustrl';

type Carrier = Record<string, string | undefined>;
const setter: TextMapSetter<Carrier> = { set: (c, k, v) => void (c[k] = v) };
const getter: TextMapGetter<Carrier> = {
  keys: (c) => Object.keys(c),
  get: (c, k) => c[k],
};

export interface TraceHeaders {
  traceparent: string;
  tracestate?: string;
}

export function injectTraceHeaders(ctx: Context = context.active()): TraceHeaders | undefined {
  const carrier: Carrier = {};
  w3c.inject(ctx, carrier, setter);
  // A globally configured propagator (e.g. baggage) may add more; W3C alone is the contract.
  propagation.inject(ctx, carrier, setter);
  if (!carrier.traceparent) return undefined;
  return carrier.tracestate ? { traceparent: carrier.traceparent, tracestate: carrier.tracestate } : { traceparent: carrier.traceparent };
}

export function extractTraceContext(headers: Carrier, base: Context = ROOT_CONTEXT): Context {
  return w3c.extract(base, headers, getter);
}

export function tracer() {
  return trace.getTracer(TRACER_NAME);
}

/** Run `fn` inside a span; errors mark the span and propagate. */
export async function inSpan<T>(
  name: string,
  options: { kind: SpanKind; parent?: Context; attributes?: Record<string, string | number | boolean> },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = options.parent ?? context.active();
  const span = tracer().startSpan(name, { kind: options.kind, attributes: options.attributes }, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(span));
  } catch (err) {
    span.recordException(err as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    throw err;
  } finally {
    span.end();
  }
}

export { SpanKind };
