/**
 * robustrl's errors and the one rule that says what a failure means for a retry (kafkajs's `errors.js`
 * drawn for our code). Three answers, docs/contributors/delivery-guarantees.md "Bad input never blocks":
 *
 * - `unavailable`: a dependency (the store, the broker, a service we call) is down, restarting or timing
 *   out. It says nothing about the record: the record waits and is retried for as long as the outage
 *   lasts, without spending its retry budget, and is never dead-lettered for it.
 * - `final`: the error says `retriable: false` (NonRetriableError, a record too large, kafkajs's own
 *   non-retriable errors): asking again cannot help, so a record failing with it is dead-lettered at once.
 * - `retriable`: anything else, a plain `Error` and a value that is no error included: retried with
 *   backoff, and dead-lettered when the retry budget runs out.
 *
 * This module imports nothing, so any layer allowed to import the bus can throw its errors.
 */

/**
 * The base of robustrl's errors: `name` is the subclass's, and `retriable` says whether asking again may
 * succeed (default true, as kafkajs's `KafkaJSError`). A handler throwing a non-retriable one has its
 * record dead-lettered without retries; a retriable one is retried (`failureClass`).
 */
export class RobustrlError extends Error {
  readonly retriable: boolean;

  constructor(message: string, options: { retriable?: boolean; cause?: unknown } = {}) {
    super(message, 'cause' in options ? { cause: options.cause } : undefined);
    this.name = new.target.name;
    this.retriable = options.retriable ?? true;
  }
}

/** Throw this (or any error with `retriable: false`) to dead-letter a record without retrying. */
export class NonRetriableError extends RobustrlError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { ...options, retriable: false });
  }
}

/** Throw this from a handler when a dependency is unavailable: the record waits and is retried, never dead-lettered. */
export class DependencyUnavailableError extends RobustrlError {
  readonly infrastructure = true;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { ...options, retriable: true });
  }
}

/** What a failure means for a retry (the module's comment). */
export type FailureClass = 'unavailable' | 'retriable' | 'final';

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

function isUnavailable(err: unknown, depth: number): boolean {
  if (typeof err !== 'object' || err === null || depth > 5) return false;
  const e = err as { infrastructure?: unknown; code?: unknown; name?: unknown; message?: unknown; retriable?: unknown; cause?: unknown; driverError?: unknown };
  if (e.infrastructure === true) return true;
  if (typeof e.code === 'string' && (NETWORK_CODES.has(e.code) || (/^[0-9A-Z]{5}$/.test(e.code) && isUnavailableSqlState(e.code)))) return true;
  // kafkajs marks its own transient errors (connection, request timeout, leader election) retriable.
  if (typeof e.name === 'string' && e.name.startsWith('KafkaJS') && e.retriable === true) return true;
  if (typeof e.message === 'string' && (LOST_CONNECTION.test(e.message) || NETWORK_CODE_IN_MESSAGE.test(e.message))) return true;
  return isUnavailable(e.driverError, depth + 1) || isUnavailable(e.cause, depth + 1);
}

/**
 * The one rule for any thrown value. A dependency that is unavailable wins over the error's own flag
 * (kafkajs wraps a refused connection in a non-retriable error); then `retriable: false` is final;
 * everything else is retriable.
 */
export function failureClass(err: unknown): FailureClass {
  if (isUnavailable(err, 0)) return 'unavailable';
  if (typeof err === 'object' && err !== null && (err as { retriable?: unknown }).retriable === false) return 'final';
  return 'retriable';
}

/** Whether asking again may succeed: anything but a `final` failure. */
export function isRetriable(err: unknown): boolean {
  return failureClass(err) !== 'final';
}

/** Whether the failure is the infrastructure's, not the record's: it waits without spending the retry budget. */
export function isInfrastructureError(err: unknown): boolean {
  return failureClass(err) === 'unavailable';
}
