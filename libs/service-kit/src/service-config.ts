import { isIP } from 'node:net';
import { z } from 'zod';
import { BusIdentity, busConfigFromEnv, BusConfig, busIdentityFromEnv } from '@robustrl/bus';
import { StoreConfig, storeConfigFromEnv } from '@robustrl/store';
import { HttpAuth, httpAuthFromEnv } from './http-auth';

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

const Port = z.coerce.number().int().min(0).max(65535);
export const DEFAULT_HTTP_HOST = '127.0.0.1';

/** Read and validate a service's configuration; a bad value stops start-up with a message naming it. */
export function serviceConfigFromEnv(serviceName: string, defaultPort: number | null, env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  let httpPort: number | null = defaultPort;
  if (env.ROBUSTRL_HTTP_PORT !== undefined) {
    if (env.ROBUSTRL_HTTP_PORT === 'off') httpPort = null;
    else {
      const parsed = Port.safeParse(env.ROBUSTRL_HTTP_PORT);
      if (!parsed.success) throw new Error(`ROBUSTRL_HTTP_PORT must be a port number or 'off', got '${env.ROBUSTRL_HTTP_PORT}'`);
      httpPort = parsed.data;
    }
  }
  const httpHost = env.ROBUSTRL_HTTP_HOST?.trim() || DEFAULT_HTTP_HOST;
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
