import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';

export interface TelemetryHandle {
  /** True when spans are exported (an OTEL_* exporter variable was set). */
  readonly exporting: boolean;
  shutdown(): Promise<void>;
}

let contextManagerInstalled = false;

/** Async context so a span started in a consumer is the parent of what its handler publishes. */
export function ensureContextManager(): void {
  if (contextManagerInstalled) return;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  contextManagerInstalled = true;
}

/**
 * Tracing is configured the standard way, by `OTEL_*` variables (OTEL_TRACES_EXPORTER,
 * OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, ...), and is off when none is set: no exporter,
 * no background work, but trace context still propagates through Kafka headers.
 */
export async function setupTelemetry(serviceName: string, env: NodeJS.ProcessEnv = process.env): Promise<TelemetryHandle> {
  const wanted =
    env.OTEL_SDK_DISABLED !== 'true' &&
    ((env.OTEL_TRACES_EXPORTER !== undefined && env.OTEL_TRACES_EXPORTER !== 'none') ||
      env.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined ||
      env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined);
  if (!wanted) {
    ensureContextManager();
    return { exporting: false, shutdown: async () => undefined };
  }
  // Loaded lazily: the SDK is heavy and most processes (tests, CLI) never need it.
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const sdk = new NodeSDK({ serviceName: env.OTEL_SERVICE_NAME ?? serviceName });
  sdk.start();
  contextManagerInstalled = true;
  return { exporting: true, shutdown: () => sdk.shutdown() };
}
