import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import { isIP } from 'node:net';

/**
 * Who may call a service's HTTP API: holders of one of its bearer tokens, or anyone (`open`).
 *
 * Tokens are kept as SHA-256 digests and compared in constant time, so neither the process's memory
 * dumps nor response timing give a token away. Several tokens may be valid at once: a rotation adds
 * the new one, moves the callers, then drops the old one.
 */
export type HttpAuth = { kind: 'bearer'; digests: readonly Buffer[] } | { kind: 'open'; why: 'loopback' | 'disabled' };

/** Paths served without a token: Kubernetes probes and load balancers cannot carry one, and they tell nothing. */
export const PUBLIC_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

/** Shorter tokens are refused: a bearer token is the whole credential, it must not be guessable. */
export const MIN_TOKEN_LENGTH = 16;

/**
 * The auth of an HTTP listener from its settings, `<prefix>_TOKENS` (comma separated),
 * `<prefix>_TOKENS_FILE` (one per line, `#` comments; a mounted Kubernetes secret) and `<prefix>_AUTH`
 * (`token`, the default, or `none`).
 *
 * The rule: a listener reachable from other machines needs tokens. Bound to loopback without tokens it
 * stays open, as today (a developer's machine, the agent's API for its own framework); bound anywhere
 * else without tokens it refuses to start, naming the settings, unless `<prefix>_AUTH=none` says the
 * operator put something else in front (a mesh with mTLS, a network policy). Tokens given are always
 * enforced, whatever the address.
 */
export function httpAuthFromEnv(env: NodeJS.ProcessEnv, bindHost: string, prefix = 'ROBUSTRL_HTTP'): HttpAuth {
  const mode = env[`${prefix}_AUTH`]?.trim().toLowerCase() || 'token';
  if (mode !== 'token' && mode !== 'none') throw new Error(`${prefix}_AUTH must be token or none, got '${env[`${prefix}_AUTH`]}'`);
  const tokens = tokensFromEnv(env, prefix);
  if (mode === 'none') {
    if (tokens.length > 0) throw new Error(`${prefix}_AUTH=none contradicts the tokens given in ${prefix}_TOKENS/${prefix}_TOKENS_FILE: drop one`);
    return { kind: 'open', why: 'disabled' };
  }
  if (tokens.length > 0) return { kind: 'bearer', digests: tokens.map(digestOf) };
  if (isLoopback(bindHost)) return { kind: 'open', why: 'loopback' };
  throw new Error(
    `the HTTP API would listen on ${bindHost}, reachable from other machines, without a token: set ${prefix}_TOKENS or ` +
      `${prefix}_TOKENS_FILE (callers send "Authorization: Bearer <token>"), or ${prefix}_AUTH=none if something else guards it`,
  );
}

/**
 * The tokens `<prefix>_TOKENS` and `<prefix>_TOKENS_FILE` give, checked, in order. For a process that
 * must hand one on (the agent gives its role process the first, as ROBUSTRL_AGENT_TOKEN).
 */
export function tokensFromEnv(env: NodeJS.ProcessEnv, prefix = 'ROBUSTRL_HTTP'): string[] {
  return [...tokensFromList(env[`${prefix}_TOKENS`], `${prefix}_TOKENS`), ...tokensFromFile(env[`${prefix}_TOKENS_FILE`], `${prefix}_TOKENS_FILE`)];
}

/**
 * Why a request may not pass (it goes back in the 401), and RFC 6750's error code: none when it carried
 * no credentials (§3.1: then the challenge names no error), `invalid_request` for a malformed header,
 * `invalid_token` for a token that is not valid.
 */
export type BearerRefusal = { ok: false; reason: string; error?: 'invalid_request' | 'invalid_token' };

/** Whether a request with this `Authorization` header may pass; the refusal when not. */
export function checkBearer(auth: HttpAuth, authorization: string | undefined): { ok: true } | BearerRefusal {
  if (auth.kind === 'open') return { ok: true };
  if (!authorization) return { ok: false, reason: 'missing bearer token (Authorization: Bearer <token>)' };
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
  if (!match) return { ok: false, reason: 'the Authorization header is not a bearer token', error: 'invalid_request' };
  const presented = digestOf(match[1]);
  // Every digest is compared, so the time taken does not tell which (or whether any) came close.
  let valid = false;
  for (const digest of auth.digests) valid = timingSafeEqual(presented, digest) || valid;
  return valid ? { ok: true } : { ok: false, reason: 'invalid bearer token', error: 'invalid_token' };
}

/** Headers and body of the answer to a refused request (RFC 6750 §3). */
export function unauthorizedResponse(refusal: Pick<BearerRefusal, 'reason' | 'error'>): { headers: Record<string, string>; body: string } {
  return {
    headers: { 'content-type': 'application/json', 'www-authenticate': `Bearer realm="robustrl"${refusal.error ? `, error="${refusal.error}"` : ''}` },
    body: JSON.stringify({ statusCode: 401, error: 'Unauthorized', message: refusal.reason }),
  };
}

/**
 * Keeps a bearer auth's tokens in step with its settings while the process runs: `<prefix>_TOKENS_FILE`
 * is read again when it changes (polled: a mounted Kubernetes secret is swapped, not written) and on
 * SIGHUP. A rotation writes old and new token, moves the callers, then drops the old one — no restart.
 * A file that cannot be read, or holds no valid token, keeps the tokens in force (said in `log`): a
 * half-written secret must not lock every caller out. Returns what stops watching.
 */
export function reloadTokens(
  auth: HttpAuth,
  env: NodeJS.ProcessEnv,
  prefix = 'ROBUSTRL_HTTP',
  options: { intervalMs?: number; log?: (message: string) => void } = {},
): () => void {
  if (auth.kind !== 'bearer') return () => undefined;
  const log = options.log ?? (() => undefined);
  const reload = () => {
    try {
      const tokens = tokensFromEnv(env, prefix);
      if (tokens.length === 0) return log(`${prefix}_TOKENS: no token left in the settings; the tokens in force stay`);
      auth.digests = tokens.map(digestOf);
      log(`${prefix}_TOKENS: ${tokens.length} token(s) in force`);
    } catch (err) {
      log(`${prefix}_TOKENS: ${(err as Error).message}; the tokens in force stay`);
    }
  };
  const file = env[`${prefix}_TOKENS_FILE`]?.trim();
  if (file) watchFile(file, { interval: options.intervalMs ?? 5_000, persistent: false }, reload);
  process.on('SIGHUP', reload);
  return () => {
    if (file) unwatchFile(file, reload);
    process.off('SIGHUP', reload);
  };
}

/** 127.0.0.0/8, ::1 and `localhost`: addresses no other machine can reach. */
export function isLoopback(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1') return true;
  return isIP(h) === 4 && h.startsWith('127.');
}

function digestOf(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

function tokensFromList(value: string | undefined, setting: string): string[] {
  if (!value?.trim()) return [];
  return value.split(',').map((t, i) => checkedToken(t.trim(), `${setting} (item ${i + 1})`));
}

function tokensFromFile(path: string | undefined, setting: string): string[] {
  if (!path?.trim()) return [];
  let text: string;
  try {
    text = readFileSync(path.trim(), 'utf8');
  } catch (err) {
    throw new Error(`${setting}: cannot read ${path}: ${(err as Error).message}`);
  }
  const tokens = text
    .split('\n')
    .map((line, i) => ({ token: line.replace(/#.*$/, '').trim(), line: i + 1 }))
    .filter((t) => t.token !== '')
    .map((t) => checkedToken(t.token, `${setting} line ${t.line}`));
  if (tokens.length === 0) throw new Error(`${setting}: ${path} holds no token`);
  return tokens;
}

function checkedToken(token: string, where: string): string {
  if (token.length < MIN_TOKEN_LENGTH) throw new Error(`${where}: a token must have at least ${MIN_TOKEN_LENGTH} characters`);
  if (/\s/.test(token)) throw new Error(`${where}: a token must not contain white space`);
  return token;
}
