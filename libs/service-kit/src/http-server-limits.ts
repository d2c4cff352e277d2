import type { Server } from 'node:http';

/**
 * How long a listener waits on a caller, set on every HTTP server robustrl runs (the services, the
 * agent's API, the router, the HTTP orchestrator) rather than left to Node's defaults:
 *
 *  - `headersTimeoutMs`: a request's headers must arrive within it — a caller that trickles them (one
 *    byte at a time, to hold a socket) is cut;
 *  - `requestTimeoutMs`: its whole body within it (not the answer: a router's stream may run for
 *    minutes, and the socket's own inactivity timeout stays off for that);
 *  - `keepAliveTimeoutMs`: an idle kept-alive socket is closed after it.
 */
export interface ServerLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

export const DEFAULT_SERVER_LIMITS: ServerLimits = { headersTimeoutMs: 20_000, requestTimeoutMs: 120_000, keepAliveTimeoutMs: 5_000 };

/** Sets the limits on `server` (before it listens); returns it. */
export function limitServer<S extends Server>(server: S, limits: Partial<ServerLimits> = {}): S {
  const l = { ...DEFAULT_SERVER_LIMITS, ...limits };
  server.headersTimeout = l.headersTimeoutMs;
  server.requestTimeout = l.requestTimeoutMs;
  server.keepAliveTimeout = l.keepAliveTimeoutMs;
  return server;
}
