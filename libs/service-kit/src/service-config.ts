import { isIP } from 'node:net';
import { BusIdentity, busConfigFromEnv, BusConfig, busIdentityFromEnv } from '@robustrl/bus';
import { StoreConfig, storeConfigFromEnv } from '@robustrl/store';
import { HttpAuth, httpAuthFromEnv } from './http-auth';
import { HTTP_HOST, HTTP_PORT } from './service-settings';

export interface ServiceConfig {
  serviceName: string;
  bus: BusConfig;
  store: StoreConfig;
  /** HTTP port of the health endpoint; 0 picks a free one, null disables HTTP. */
  httpPort: number | null;
  /**
   * The address the HTTP port binds (`ROBUSTRL_HTTP_HOST`): loopback by default; `0.0.0.0` (or a pod's
   * address) in a container, where probes and Prometheus reach it from outside — with bearer tokens then.
   */
  httpHost?: string;
  /**
   * Who may call the HTTP API (`ROBUSTRL_HTTP_TOKENS`, `_TOKENS_FILE`, `_AUTH`; http-auth.ts): every path
   * but `/healthz` and `/readyz` needs a token when tokens are set. Unset: what `httpAuthFromEnv` says for
   * `httpHost` with no settings (open on loopback, refused elsewhere).
   */
  httpAuth?: HttpAuth;
  /** The settings `httpAuth` came from, read again when its tokens rotate (http-auth.ts `reloadTokens`). */
  httpAuthSettings?: NodeJS.ProcessEnv;
  /**
   * Who the process is on the bus: it signs what it publishes and drops what is not signed by whom it
   * speaks for (ROBUSTRL_IDENTITY_SECRET; docs/operators/security.md "Who speaks on the bus"). Absent: unsigned.
   */
  identity?: BusIdentity;
  /** The clock deciders read (default: the wall clock). The main job runs its emulated cluster in scaled time. */
  clock?: () => number;
}

export { DEFAULT_HTTP_HOST } from './service-settings';

/** Read and validate a service's configuration; a bad value stops start-up with a message naming it. */
export function serviceConfigFromEnv(serviceName: string, defaultPort: number | null, env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  const port = HTTP_PORT.read(env);
  const httpPort: number | null = port === undefined ? defaultPort : port;
  const httpHost = HTTP_HOST.read(env);
  if (isIP(httpHost) === 0 && !/^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(httpHost))
    throw new Error(`ROBUSTRL_HTTP_HOST must be an IP address or a host name to bind, got '${env.ROBUSTRL_HTTP_HOST}'`);
  return {
    serviceName,
    bus: busConfigFromEnv(env, `robustrl-${serviceName}`),
    store: storeConfigFromEnv(env),
    httpPort,
    httpHost,
    identity: busIdentityFromEnv(env, { service: serviceName }),
    // No listener, nothing to guard: the embedded main runs without HTTP and without credentials.
    ...(httpPort === null ? {} : { httpAuth: httpAuthFromEnv(env, httpHost), httpAuthSettings: env }),
  };
}
