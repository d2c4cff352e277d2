import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ensureContextManager } from './setup';

/** For tests: every finished span lands in memory. */
export function installInMemoryTracing(): { spans(): ReadableSpan[]; reset(): void } {
  ensureContextManager();
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  trace.setGlobalTracerProvider(provider);
  return { spans: () => exporter.getFinishedSpans(), reset: () => exporter.reset() };
}
