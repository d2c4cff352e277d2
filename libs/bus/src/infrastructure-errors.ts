/**
 * Which handler failures are the infrastructure's, not the record's (kafkajs's retriable/non-retriable
 * line, drawn for our dependencies): a store or broker that is down, restarting or timing out. Such a
 * failure says nothing about the record, so the record is retried without limit while its partition
 * waits; dead-lettering it (and committing its offset) would lose a valid event because a dependency
 * was away. Everything else counts against the retry budget and is dead-lettered when it runs out.
 */

/** Throw this from a handler when a dependency is unavailable: the record waits and is retried, never dead-lettered. */
export class DependencyUnavailableError extends Error {
  readonly infrastructure = true;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DependencyUnavailableError';
  }
}

/** Socket-level failures reaching a dependency. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND', 'ECONNABORTED']);

/**
 * PostgreSQL SQLSTATE classes of a server that cannot serve now: 08 connection exception, 53 insufficient
 * resources, 57 operator intervention (shutdown, restart, cannot connect now); and the two transient
 * conflicts 40001 (serialization failure) and 40P01 (deadlock), which succeed when retried.
 */
const isUnavailableSqlState = (code: string) => /^(08|53|57)/.test(code) || code === '40001' || code === '40P01';

/** What the `pg` driver (and TypeORM around it) says when the connection is gone rather than the query wrong. */
const LOST_CONNECTION =
  /connection terminated|connection refused|timeout exceeded when trying to connect|not queryable|connection is closed|terminating connection|the database system is (starting up|shutting down)/i;

/** A wrapper that kept only the message of the socket error (kafkajs's non-retriable wrapper of a connection error does). */
const NETWORK_CODE_IN_MESSAGE = new RegExp(`\\b(${[...NETWORK_CODES].join('|')})\\b`);

export function isInfrastructureError(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 5) return false;
  const e = err as { infrastructure?: unknown; code?: unknown; name?: unknown; message?: unknown; retriable?: unknown; cause?: unknown; driverError?: unknown };
  if (e.infrastructure === true) return true;
  if (typeof e.code === 'string' && (NETWORK_CODES.has(e.code) || (/^[0-9A-Z]{5}$/.test(e.code) && isUnavailableSqlState(e.code)))) return true;
  // kafkajs marks its own transient errors (connection, request timeout, leader election) retriable.
  if (typeof e.name === 'string' && e.name.startsWith('KafkaJS') && e.retriable === true) return true;
  if (typeof e.message === 'string' && (LOST_CONNECTION.test(e.message) || NETWORK_CODE_IN_MESSAGE.test(e.message))) return true;
  return isInfrastructureError(e.driverError, depth + 1) || isInfrastructureError(e.cause, depth + 1);
}
