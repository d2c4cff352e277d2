import { custom, text } from '@robustrl/config';

/**
 * The OpenTelemetry SDK's standard variables that decide whether a service traces at all, read by
 * setupTelemetry (docs/operators/observability.md "Tracing and metrics"); the SDK itself reads these and the rest of its
 * `OTEL_*` variables (protocol, headers, sampler, …) once started.
 */
const owner = 'services';
const standard = 'OpenTelemetry SDK standard variable';

export const OTEL_SDK_DISABLED = custom('OTEL_SDK_DISABLED', {
  owner,
  meaning: `${standard}: \`true\` turns tracing off whatever else is set`,
  default: false,
  defaultText: 'false',
  accepted: '`true`; any other value leaves tracing as the other variables say',
  parse: (raw) => raw === 'true',
});
export const OTEL_TRACES_EXPORTER = text('OTEL_TRACES_EXPORTER', {
  owner,
  meaning: `${standard}: the span exporter (\`otlp\`, \`console\`, …); set and not \`none\`, the service exports spans`,
  default: undefined,
  defaultText: 'none: tracing off unless an OTLP endpoint is set',
  accepted: "an exporter name the SDK knows, or 'none'",
});
export const OTEL_EXPORTER_OTLP_ENDPOINT = text('OTEL_EXPORTER_OTLP_ENDPOINT', {
  owner,
  meaning: `${standard}: the OTLP collector's base URL (e.g. \`http://collector:4318\`); set, the service exports spans`,
  default: undefined,
  accepted: 'a URL',
});
export const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = text('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', {
  owner,
  meaning: `${standard}: the OTLP collector's URL for spans only; set, the service exports spans`,
  default: undefined,
  accepted: 'a URL',
});
export const OTEL_SERVICE_NAME = text('OTEL_SERVICE_NAME', {
  owner,
  meaning: `${standard}: the service name its spans carry`,
  default: undefined,
  defaultText: "the process's own (`robustrl-<service>`)",
});
