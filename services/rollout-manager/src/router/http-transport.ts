import { Agent, ClientRequest, IncomingMessage, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { RobustrlError } from '@robustrl/bus';

/** How `send` reaches the engine. */
export interface SendOptions {
  agent: Agent | false;
  idleTimeoutMs: number;
  /** The request is destroyed when any of these aborts. */
  signals?: readonly AbortSignal[];
  headers?: Record<string, string>;
}

/**
 * node:http plumbing both ways: the callers' request bodies in (readAll), the requests to the engines
 * out (send). An engine's health is judged from how these fail, so they report every way they can.
 */
export function send(url: string, method: 'GET' | 'POST', payload: string | null, options: SendOptions): Promise<IncomingMessage> {
  return sendOnce(url, method, payload, options).catch((err: unknown) => {
    // A pooled keep-alive socket the engine closed as it went idle (uvicorn closes them after 5 s) fails
    // the next request on it before any answer: the engine never saw it. Sent again on a new connection,
    // once — counted against the engine, such a race read as an engine failing its requests.
    if (!(err instanceof StaleSocketError) || options.signals?.some((s) => s.aborted)) throw err instanceof StaleSocketError ? err.original : err;
    return sendOnce(url, method, payload, { ...options, agent: false });
  });
}

/** A request that failed on a reused keep-alive socket before any response (node's `req.reusedSocket`). */
class StaleSocketError extends RobustrlError {
  constructor(readonly original: unknown) {
    super('stale keep-alive socket');
  }
}

function sendOnce(url: string, method: 'GET' | 'POST', payload: string | null, options: SendOptions): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const https = url.startsWith('https:');
    const headers: Record<string, string | number> = { accept: 'application/json, text/event-stream', ...options.headers };
    if (payload !== null) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = Buffer.byteLength(payload);
    }
    const req = (https ? httpsRequest : httpRequest)(url, {
      method,
      headers,
      ...(https ? {} : { agent: options.agent }),
      timeout: options.idleTimeoutMs,
    });
    // The socket timeout covers the whole exchange: an engine that stops sending mid-stream is dead to this request.
    req.on('timeout', () => {
      silentRequests.add(req);
      req.destroy(new UpstreamSilentError(options.idleTimeoutMs));
    });
    req.on('response', resolve);
    req.on('error', (err: NodeJS.ErrnoException) => {
      const stale = req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE') && !silentRequests.has(req);
      reject(stale ? new StaleSocketError(err) : err);
    });
    for (const signal of options.signals ?? []) abortWith(req, signal);
    req.end(payload ?? undefined);
  });
}

/**
 * The request is destroyed when `signal` aborts, as node:http's own `signal` option does, at less cost:
 * node's ties the signal to the request through `finished()` (several listeners on every request), where
 * one listener, removed when the request closes, does. With the attempt's ends handed in as they are
 * (no controller joining them) the router spends 13–19 % less CPU a request (docs/router.md "The lean path").
 */
function abortWith(req: ClientRequest, signal: AbortSignal): void {
  const abort = () => req.destroy(Object.assign(new Error('The operation was aborted', { cause: signal.reason }), { name: 'AbortError', code: 'ABORT_ERR' }));
  if (signal.aborted) {
    abort();
    return;
  }
  signal.addEventListener('abort', abort, { once: true });
  req.once('close', () => signal.removeEventListener('abort', abort));
}

/** The engine sent nothing for the idle timeout: the one failure a slow engine shares with a hung one. */
export class UpstreamSilentError extends RobustrlError {
  constructor(idleTimeoutMs: number) {
    super(`no bytes for ${idleTimeoutMs} ms`);
  }
}

/** Requests given up on for their silence; a response that failed after its headers is looked up by its request (`res.req`, set by node:http and left out of its types). */
const silentRequests = new WeakSet<object>();

/** Whether this failure (of `send`, or of reading the response `res`) was the engine's silence, not an error. */
export function wentSilent(err: unknown, res?: IncomingMessage): boolean {
  return err instanceof UpstreamSilentError || (res !== undefined && silentRequests.has((res as IncomingMessage & { req: object }).req));
}

/** A body past the reader's limit: from an engine, a misbehaving engine (never buffered whole). */
export class BodyTooLargeError extends RobustrlError {
  constructor(readonly limit: number) {
    super(`the body exceeds ${limit} bytes`);
  }
}

/** What an engine's whole answer (or error) may weigh before the router stops reading it. */
export const DEFAULT_ENGINE_ANSWER_BYTES = 64 * 1024 * 1024;

export function readAll(stream: IncomingMessage, limit = Number.POSITIVE_INFINITY): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        // Rejected first: destroying the stream emits its own 'aborted' and 'close' at once.
        reject(new BodyTooLargeError(limit));
        stream.destroy();
        return;
      }
      chunks.push(c);
    });
    stream.on('end', () => (stream.complete === false ? reject(new Error('incomplete body')) : resolve(Buffer.concat(chunks))));
    stream.on('error', reject);
    stream.on('aborted', () => reject(new Error('aborted')));
    stream.on('close', () => {
      if (!stream.complete) reject(new Error('connection closed before the body was complete'));
    });
  });
}

export function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code ? `${code} ${err.message}` : err.message;
  }
  return String(err);
}
