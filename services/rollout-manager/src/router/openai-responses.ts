import { ServerResponse } from 'node:http';
import { ROLLOUT_HEADER } from './trajectory-identity';

/**
 * The shapes the router answers callers in, as an OpenAI server does: JSON errors, SSE events, an
 * engine's answer relayed as is. Each checks what was already sent, because failover may reach for
 * them at any point of a response (before the stream began, or in its middle).
 */
export function writeEvent(res: ServerResponse, data: unknown): void {
  if (!res.destroyed && !res.writableEnded) res.write(`data: ${JSON.stringify(data)}\n\n`);
}

export function endStream(res: ServerResponse, before = ''): void {
  if (!res.destroyed && !res.writableEnded) res.end(`${before}data: [DONE]\n\n`);
}

/** An error once the stream began: an SSE error event (the status line is already sent). */
export function streamError(res: ServerResponse, code: number, type: string, message: string): null {
  if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  writeEvent(res, { error: { message, type, param: null, code } });
  if (!res.destroyed && !res.writableEnded) res.end();
  return null;
}

/** OpenAI's error shape: `{"error": {"message", "type", "param", "code"}}`. */
export function sendError(res: ServerResponse, status: number, type: string, message: string): void {
  if (res.headersSent) return void streamError(res, status, type, message);
  const body = JSON.stringify({ error: { message, type, param: null, code: status } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

export function relay(res: ServerResponse, status: number, body: Buffer, engineId: string | null): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length, ...(engineId ? { [ROLLOUT_HEADER]: engineId } : {}) }).end(body);
}
