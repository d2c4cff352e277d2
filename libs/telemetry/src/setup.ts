import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { SynchronousContextManager } from './synchronous-context';
import {
  OTEL_EXPORTER_OTLP_ENDPOINT,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
  OTEL_SDK_DISABLED,
  OTEL_SERVICE_NAME,
  OTEL_TRACES_EXPORTER,
} from './telemetry-settings';

export interface TelemetryHandle {
  /** True when spans are exported (an OTEL_* exporter variable was set). */
  readonly exporting: boolean;
  shutdown(): Promise<void>;
}

/**
 * How the active span follows the code: `async` across every `await` (AsyncLocalStorage: a hook on every
 * promise of the process), or `synchronous` (synchronous-context.ts: within synchronous calls only, for
 * processes that carry the context explicitly where it crosses an `await`).
 */
export type ContextPropagation = 'async' | 'synchronous';

let contextManagerInstalled = false;

function contextManagerFor(propagation: ContextPropagation) {
  return propagation === 'synchronous' ? new SynchronousContextManager() : new AsyncLocalStorageContextManager();
}

/** Context so a span started in a consumer is the parent of what its handler publishes. The first call installs it. */
export function ensureContextManager(propagation: ContextPropagation = 'async'): void {
  if (contextManagerInstalled) return;
  context.setGlobalContextManager(contextManagerFor(propagation).enable());
  contextManagerInstalled = true;
}

/**
 * Tracing is configured the standard way, by `OTEL_*` variables (OTEL_TRACES_EXPORTER,
 * OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, ...; telemetry-settings.ts), and is off when none is set: no exporter,
 * no background work, but trace context still propagates through Kafka headers.
 */
export async function setupTelemetry(
  serviceName: string,
  env: NodeJS.ProcessEnv = process.env,
  propagation: ContextPropagation = 'async',
): Promise<TelemetryHandle> {
  const exporter = OTEL_TRACES_EXPORTER.read(env);
  const wanted =
    !OTEL_SDK_DISABLED.read(env) &&
    ((exporter !== undefined && exporter !== 'none') ||
      OTEL_EXPORTER_OTLP_ENDPOINT.read(env) !== undefined ||
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.read(env) !== undefined);
  if (!wanted) {
    ensureContextManager(propagation);
    return { exporting: false, shutdown: async () => undefined };
  }
  // Loaded lazily: the SDK is heavy and most processes (tests, CLI) never need it.
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const sdk = new NodeSDK({ serviceName: OTEL_SERVICE_NAME.read(env) ?? serviceName, contextManager: contextManagerFor(propagation) });
  sdk.start();
  contextManagerInstalled = true;
  return { exporting: true, shutdown: () => sdk.shutdown() };
}
