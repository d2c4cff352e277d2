import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, unwatchFile, watchFile } from 'node:fs';
import { isIP } from 'node:net';
import { custom, Setting, text } from '@robustrl/config';

/**
 * What a token lets its holder do. Each scope includes the ones below it:
 *
 *   admin    everything, and what changes who serves (the router's engine membership)
 *   caller   the service's own work: generation at the router, trajectory writes at the request
 *            manager, the agent's API for its framework (`<prefix>_TOKENS`, the tokens every
 *            service had before scopes)
 *   read     GET of what the service holds (engines, trajectories, ETTR)
 *   metrics  GET /metrics only: a Prometheus scrape token can read counters, nothing else
 */
export type TokenScope = 'admin' | 'caller' | 'read' | 'metrics';

/** Lowest first: a token of scope i may do what any scope j ≤ i may. */
export const TOKEN_SCOPES: readonly TokenScope[] = ['metrics', 'read', 'caller', 'admin'];

/** The settings each scope's tokens come from: `<prefix>_<suffix>` and `<prefix>_<suffix>_FILE`. */
export const SCOPE_SETTINGS: Readonly<Record<TokenScope, string>> = { admin: 'ADMIN_TOKENS', caller: 'TOKENS', read: 'READ_TOKENS', metrics: 'METRICS_TOKENS' };

/**
 * Who may call a service's HTTP API: holders of one of its bearer tokens, each token of one scope, or
 * anyone (`open`).
 *
 * Tokens are kept as SHA-256 digests and compared in constant time, so neither the process's memory
 * dumps nor response timing give a token away. Several tokens may be valid at once in a scope: a
 * rotation adds the new one, moves the callers, then drops the old one.
 */
export type HttpAuth = { kind: 'bearer'; digests: Record<TokenScope, readonly Buffer[]> } | { kind: 'open'; why: 'loopback' | 'disabled' };

/** Paths served without a token: Kubernetes probes and load balancers cannot carry one, and they tell nothing. */
export const PUBLIC_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

/** Shorter tokens are refused: a bearer token is the whole credential, it must not be guessable. */
export const MIN_TOKEN_LENGTH = 16;

/**
 * The listeners whose tokens robustrl reads, by their settings' prefix (docs/operators/security.md "Securing the
 * HTTP APIs"): every service's API (the agent's too), the router's, and the machine host's orchestrator API.
 */
export type HttpAuthPrefix = 'ROBUSTRL_HTTP' | 'ROBUSTRL_ROUTER' | 'ROBUSTRL_ORCHESTRATOR';

/** One listener's settings: `<prefix>_AUTH`, and per scope its token list and its file. */
export interface HttpAuthSettings {
  auth: Setting<'token' | 'none'>;
  tokens: Record<TokenScope, Setting<string[]>>;
  files: Record<TokenScope, Setting<string | undefined>>;
}

const SCOPE_MEANINGS: Readonly<Record<TokenScope, string>> = {
  admin: "admin scope: everything, and what changes who serves (the router's engine membership)",
  caller: "caller scope: the API's own work",
  read: 'read scope: GET of what it holds',
  metrics: 'metrics scope: GET /metrics only (a Prometheus scrape)',
};

/** Registers one listener's settings (each concrete name its tokens are read from). */
function httpAuthSettings(prefix: HttpAuthPrefix, owner: string, api: string, callerNote = ''): HttpAuthSettings {
  const scoped = <T>(of: (name: string, scope: TokenScope) => T) =>
    Object.fromEntries(TOKEN_SCOPES.map((scope) => [scope, of(`${prefix}_${SCOPE_SETTINGS[scope]}`, scope)])) as Record<TokenScope, T>;
  return {
    auth: custom(`${prefix}_AUTH`, {
      owner,
      meaning:
        `\`token\`: ${api} takes the tokens given, and without any stays open on loopback only (elsewhere it refuses to start); ` +
        '`none`: no token, where something else guards it (a mesh with mTLS, a network policy)',
      default: 'token' as const,
      accepted: 'token or none (any case)',
      parse: (raw) => (['token', 'none'] as const).find((mode) => mode === raw.toLowerCase()),
    }),
    tokens: scoped((name, scope) =>
      custom(name, {
        owner,
        meaning: `bearer tokens of ${api}, ${SCOPE_MEANINGS[scope]}${scope === 'caller' ? callerNote : ''}`,
        default: [] as string[],
        defaultText: 'none',
        accepted: `tokens of at least ${MIN_TOKEN_LENGTH} characters without white space, comma separated`,
        parse: (raw) => tokensFromList(raw, name),
      }),
    ),
    files: scoped((name) =>
      text(`${name}_FILE`, {
        owner,
        meaning: `a file of \`${name}\` tokens, one a line (\`#\` comments; a mounted secret), read again when it changes and on SIGHUP`,
        default: undefined,
        accepted: 'a readable file holding at least one token',
      }),
    ),
  };
}

/** The settings of each listener robustrl serves or calls with tokens. */
export const HTTP_AUTH_SETTINGS: Readonly<Record<HttpAuthPrefix, HttpAuthSettings>> = {
  ROBUSTRL_HTTP: httpAuthSettings('ROBUSTRL_HTTP', 'services', "the service's HTTP API"),
  ROBUSTRL_ROUTER: httpAuthSettings('ROBUSTRL_ROUTER', 'router', "the router's API", ' (agent loops give one as their OpenAI `api_key`)'),
  ROBUSTRL_ORCHESTRATOR: httpAuthSettings(
    'ROBUSTRL_ORCHESTRATOR',
    'controller, rollout-manager',
    "the machine host's orchestrator API (`ROBUSTRL_ORCHESTRATOR=http`; a host serves it with serveOrchestrator, libs/orchestrator/README.md)",
    '; the controller and the rollout manager send the first',
  ),
};

/** Whether any scope's tokens are given for `prefix` (a list or a file), unread. */
export function httpTokensGiven(env: NodeJS.ProcessEnv, prefix: HttpAuthPrefix = 'ROBUSTRL_HTTP'): boolean {
  const settings = HTTP_AUTH_SETTINGS[prefix];
  return TOKEN_SCOPES.some((scope) => !!env[settings.tokens[scope].info.name]?.trim() || !!env[settings.files[scope].info.name]?.trim());
}

/**
 * The auth of an HTTP listener from its settings: per scope `<prefix>_TOKENS`, `<prefix>_ADMIN_TOKENS`,
 * `<prefix>_READ_TOKENS`, `<prefix>_METRICS_TOKENS` (comma separated) and each with `_FILE` (one per
 * line, `#` comments; a mounted Kubernetes secret), and `<prefix>_AUTH` (`token`, the default, or `none`).
 *
 * The rule: a listener reachable from other machines needs tokens. Bound to loopback without tokens it
 * stays open, as today (a developer's machine, the agent's API for its own framework); bound anywhere
 * else without tokens it refuses to start, naming the settings, unless `<prefix>_AUTH=none` says the
 * operator put something else in front (a mesh with mTLS, a network policy). Tokens given are always
 * enforced, whatever the address. A token given in two scopes is refused: its holder's rights must be
 * read in one place.
 */
export function httpAuthFromEnv(env: NodeJS.ProcessEnv, bindHost: string, prefix: HttpAuthPrefix = 'ROBUSTRL_HTTP'): HttpAuth {
  const mode = HTTP_AUTH_SETTINGS[prefix].auth.read(env);
  const scoped = scopedTokensFromEnv(env, prefix);
  const given = TOKEN_SCOPES.some((scope) => scoped[scope].length > 0);
  if (mode === 'none') {
    if (given) throw new Error(`${prefix}_AUTH=none contradicts the tokens given in ${prefix}_*TOKENS/${prefix}_*TOKENS_FILE: drop one`);
    return { kind: 'open', why: 'disabled' };
  }
  if (given) return { kind: 'bearer', digests: digestsOf(scoped) };
  if (isLoopback(bindHost)) return { kind: 'open', why: 'loopback' };
  throw new Error(
    `the HTTP API would listen on ${bindHost}, reachable from other machines, without a token: set ${prefix}_TOKENS or ` +
      `${prefix}_TOKENS_FILE (callers send "Authorization: Bearer <token>"), or ${prefix}_AUTH=none if something else guards it`,
  );
}

/**
 * The caller-scope tokens `<prefix>_TOKENS` and `<prefix>_TOKENS_FILE` give, checked, in order. For a
 * process that must hand one on.
 */
export function tokensFromEnv(env: NodeJS.ProcessEnv, prefix: HttpAuthPrefix = 'ROBUSTRL_HTTP'): string[] {
  return tokensOfScope(env, prefix, 'caller');
}

/**
 * Why a request may not pass, and RFC 6750's error code: none when it carried no credentials (§3.1:
 * then the challenge names no error), `invalid_request` for a malformed header, `invalid_token` for a
 * token that is not valid (all 401), `insufficient_scope` for a valid token whose scope is below what
 * the request needs (403, the scope it needs named).
 */
export type BearerRefusal = {
  ok: false;
  status: 401 | 403;
  reason: string;
  error?: 'invalid_request' | 'invalid_token' | 'insufficient_scope';
  scope?: TokenScope;
};

/**
 * Whether a request with this `Authorization` header may do what needs scope `need` (default
 * `caller`); the refusal when not.
 */
export function checkBearer(auth: HttpAuth, authorization: string | undefined, need: TokenScope = 'caller'): { ok: true; scope?: TokenScope } | BearerRefusal {
  if (auth.kind === 'open') return { ok: true };
  if (!authorization) return { ok: false, status: 401, reason: 'missing bearer token (Authorization: Bearer <token>)' };
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization);
  if (!match) return { ok: false, status: 401, reason: 'the Authorization header is not a bearer token', error: 'invalid_request' };
  const presented = digestOf(match[1]);
  // Every digest of every scope is compared, so the time taken does not tell which (or whether any) came close.
  let held: TokenScope | null = null;
  for (const scope of TOKEN_SCOPES) for (const digest of auth.digests[scope]) if (timingSafeEqual(presented, digest)) held = scope;
  if (held === null) return { ok: false, status: 401, reason: 'invalid bearer token', error: 'invalid_token' };
  if (TOKEN_SCOPES.indexOf(held) < TOKEN_SCOPES.indexOf(need))
    return { ok: false, status: 403, reason: `this token's scope is ${held}; the request needs ${need}`, error: 'insufficient_scope', scope: need };
  return { ok: true, scope: held };
}

/** Headers and body of the answer to a refused request (RFC 6750 §3): 401 or 403 as `refusal.status` says. */
export function unauthorizedResponse(refusal: Pick<BearerRefusal, 'reason' | 'error' | 'scope'> & { status?: 401 | 403 }): {
  status: 401 | 403;
  headers: Record<string, string>;
  body: string;
} {
  const status = refusal.status ?? 401;
  const challenge = `Bearer realm="robustrl"${refusal.error ? `, error="${refusal.error}"` : ''}${refusal.scope ? `, scope="${refusal.scope}"` : ''}`;
  return {
    status,
    headers: { 'content-type': 'application/json', 'www-authenticate': challenge },
    body: JSON.stringify({ statusCode: status, error: status === 403 ? 'Forbidden' : 'Unauthorized', message: refusal.reason }),
  };
}

/**
 * The scope a request to a service's own API needs (the NestJS services; the router and the HTTP
 * orchestrator name theirs per route): `/metrics` needs `metrics`, any other GET or HEAD `read`, and
 * everything that changes something `caller`.
 */
export function scopeOfServiceRequest(method: string | undefined, path: string): TokenScope {
  if (path === '/metrics') return 'metrics';
  return method === 'GET' || method === 'HEAD' ? 'read' : 'caller';
}

/**
 * Keeps a bearer auth's tokens in step with its settings while the process runs: every scope's
 * `_FILE` is read again when it changes (polled: a mounted Kubernetes secret is swapped, not written)
 * and on SIGHUP. A rotation writes old and new token, moves the callers, then drops the old one — no
 * restart. Settings that cannot be read, or hold no valid token in any scope, keep the tokens in force
 * (said in `log`): a half-written secret must not lock every caller out. Returns what stops watching.
 */
export function reloadTokens(
  auth: HttpAuth,
  env: NodeJS.ProcessEnv,
  prefix: HttpAuthPrefix = 'ROBUSTRL_HTTP',
  options: { intervalMs?: number; log?: (message: string) => void } = {},
): () => void {
  if (auth.kind !== 'bearer') return () => undefined;
  const log = options.log ?? (() => undefined);
  const reload = () => {
    try {
      const scoped = scopedTokensFromEnv(env, prefix);
      const count = TOKEN_SCOPES.reduce((n, scope) => n + scoped[scope].length, 0);
      if (count === 0) return log(`${prefix}_TOKENS: no token left in the settings; the tokens in force stay`);
      auth.digests = digestsOf(scoped);
      log(`${prefix}_TOKENS: ${count} token(s) in force`);
    } catch (err) {
      log(`${prefix}_TOKENS: ${(err as Error).message}; the tokens in force stay`);
    }
  };
  const files = TOKEN_SCOPES.map((scope) => HTTP_AUTH_SETTINGS[prefix].files[scope].read(env)).filter((f): f is string => !!f);
  for (const file of files) watchFile(file, { interval: options.intervalMs ?? 5_000, persistent: false }, reload);
  process.on('SIGHUP', reload);
  return () => {
    for (const file of files) unwatchFile(file, reload);
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

function tokensOfScope(env: NodeJS.ProcessEnv, prefix: HttpAuthPrefix, scope: TokenScope): string[] {
  const { tokens, files } = HTTP_AUTH_SETTINGS[prefix];
  return [...tokens[scope].read(env), ...tokensFromFile(files[scope].read(env), files[scope].info.name)];
}

function scopedTokensFromEnv(env: NodeJS.ProcessEnv, prefix: HttpAuthPrefix): Record<TokenScope, string[]> {
  const scoped = { admin: [], caller: [], read: [], metrics: [] } as Record<TokenScope, string[]>;
  const seen = new Map<string, TokenScope>();
  for (const scope of TOKEN_SCOPES)
    for (const token of tokensOfScope(env, prefix, scope)) {
      const other = seen.get(token);
      if (other && other !== scope)
        throw new Error(`${prefix}_${SCOPE_SETTINGS[scope]}: a token is also given as ${prefix}_${SCOPE_SETTINGS[other]}; a token has one scope`);
      seen.set(token, scope);
      scoped[scope].push(token);
    }
  return scoped;
}

function digestsOf(scoped: Record<TokenScope, string[]>): Record<TokenScope, Buffer[]> {
  return { admin: scoped.admin.map(digestOf), caller: scoped.caller.map(digestOf), read: scoped.read.map(digestOf), metrics: scoped.metrics.map(digestOf) };
}

function tokensFromList(value: string, setting: string): string[] {
  return value.split(',').map((t, i) => checkedToken(t.trim(), `${setting} (item ${i + 1})`));
}

function tokensFromFile(path: string | undefined, setting: string): string[] {
  if (!path) return [];
  let content: string;
  try {
    content = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`${setting}: cannot read ${path}: ${(err as Error).message}`);
  }
  const tokens = content
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
