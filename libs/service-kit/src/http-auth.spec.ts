import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BearerRefusal, checkBearer, httpAuthFromEnv, isLoopback, reloadTokens, scopeOfServiceRequest, TOKEN_SCOPES, unauthorizedResponse } from './http-auth';
import { runService, RunningService } from './run-service';
import { serviceConfigFromEnv } from './service-config';

const TOKEN = 'operator-token-0123456789';
const ROTATED = 'rotated-token-9876543210';
const SCRAPE = 'prometheus-scrape-0123456789';

describe('httpAuthFromEnv', () => {
  it('stays open on loopback without tokens and refuses to listen anywhere else without them, naming the settings', () => {
    expect(httpAuthFromEnv({}, '127.0.0.1')).toEqual({ kind: 'open', why: 'loopback' });
    expect(httpAuthFromEnv({}, '::1')).toEqual({ kind: 'open', why: 'loopback' });
    expect(httpAuthFromEnv({}, 'localhost')).toEqual({ kind: 'open', why: 'loopback' });
    for (const host of ['0.0.0.0', '::', '10.0.0.7', 'robustrl-controller-0.robustrl'])
      expect(() => httpAuthFromEnv({}, host)).toThrow(/without a token: set ROBUSTRL_HTTP_TOKENS or ROBUSTRL_HTTP_TOKENS_FILE/);
    expect(httpAuthFromEnv({ ROBUSTRL_HTTP_AUTH: 'none' }, '0.0.0.0')).toEqual({ kind: 'open', why: 'disabled' });
  });

  it('enforces the tokens given on any address, from the list and from a file (comments and blank lines skipped)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'robustrl-auth-'));
    const file = join(dir, 'tokens');
    writeFileSync(file, `# rotated on 2026-11-24\n${ROTATED}\n\n`);
    const auth = httpAuthFromEnv({ ROBUSTRL_HTTP_TOKENS: TOKEN, ROBUSTRL_HTTP_TOKENS_FILE: file }, '127.0.0.1');
    expect(auth.kind).toBe('bearer');
    expect(checkBearer(auth, `Bearer ${TOKEN}`)).toEqual({ ok: true, scope: 'caller' });
    expect(checkBearer(auth, `bearer ${ROTATED}`)).toEqual({ ok: true, scope: 'caller' });
    expect(checkBearer(auth, undefined)).toEqual({ ok: false, status: 401, reason: expect.stringMatching(/missing bearer token/) });
    expect(checkBearer(auth, `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`)).toEqual({
      ok: false,
      status: 401,
      reason: expect.stringMatching(/not a bearer token/),
      error: 'invalid_request',
    });
    expect(checkBearer(auth, `Bearer ${TOKEN}x`)).toEqual({ ok: false, status: 401, reason: 'invalid bearer token', error: 'invalid_token' });
    expect(checkBearer(auth, `Bearer ${TOKEN.slice(0, -1)}`)).toEqual({ ok: false, status: 401, reason: 'invalid bearer token', error: 'invalid_token' });
  });

  it('refuses weak, malformed, missing or contradictory settings with the setting named', () => {
    expect(() => httpAuthFromEnv({ ROBUSTRL_HTTP_TOKENS: 'short' }, '0.0.0.0')).toThrow(
      /ROBUSTRL_HTTP_TOKENS \(item 1\): a token must have at least 16 characters/,
    );
    expect(() => httpAuthFromEnv({ ROBUSTRL_HTTP_TOKENS: `${TOKEN},` }, '0.0.0.0')).toThrow(/item 2/);
    expect(() => httpAuthFromEnv({ ROBUSTRL_HTTP_TOKENS_FILE: '/nonexistent/tokens' }, '0.0.0.0')).toThrow(/ROBUSTRL_HTTP_TOKENS_FILE: cannot read/);
    const dir = mkdtempSync(join(tmpdir(), 'robustrl-auth-'));
    writeFileSync(join(dir, 'empty'), '# nothing yet\n');
    expect(() => httpAuthFromEnv({ ROBUSTRL_HTTP_TOKENS_FILE: join(dir, 'empty') }, '0.0.0.0')).toThrow(/holds no token/);
    expect(() => httpAuthFromEnv({ ROBUSTRL_HTTP_AUTH: 'none', ROBUSTRL_HTTP_TOKENS: TOKEN }, '0.0.0.0')).toThrow(/contradicts/);
    expect(() => httpAuthFromEnv({ ROBUSTRL_HTTP_AUTH: 'basic' }, '0.0.0.0')).toThrow(/ROBUSTRL_HTTP_AUTH must be token or none/);
    expect(() => httpAuthFromEnv({}, '0.0.0.0', 'ROBUSTRL_ROUTER')).toThrow(/ROBUSTRL_ROUTER_TOKENS/);
  });

  it('knows loopback addresses from the rest', () => {
    expect(['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost'].every(isLoopback)).toBe(true);
    expect(['0.0.0.0', '::', '10.0.0.1', '128.0.0.1', 'localhost.example.com', '127.0.0.1.nip.io'].some(isLoopback)).toBe(false);
  });

  it('a service without an HTTP port needs no credential, wherever it would bind', () => {
    expect(serviceConfigFromEnv('embedded', null, { ROBUSTRL_HTTP_HOST: '0.0.0.0' }).httpAuth).toBeUndefined();
    expect(() => serviceConfigFromEnv('controller', 8082, { ROBUSTRL_HTTP_HOST: '0.0.0.0' })).toThrow(/without a token/);
  });
});

describe('token scopes', () => {
  const ADMIN = 'admin-token-0123456789';
  const READ = 'read-token-0123456789';
  const METRICS = 'metrics-token-0123456789';
  const auth = httpAuthFromEnv(
    { ROBUSTRL_ROUTER_TOKENS: TOKEN, ROBUSTRL_ROUTER_ADMIN_TOKENS: ADMIN, ROBUSTRL_ROUTER_READ_TOKENS: READ, ROBUSTRL_ROUTER_METRICS_TOKENS: METRICS },
    '0.0.0.0',
    'ROBUSTRL_ROUTER',
  );
  const allowed = (token: string) => TOKEN_SCOPES.filter((need) => checkBearer(auth, `Bearer ${token}`, need).ok);

  it('each scope includes those below it and nothing above', () => {
    expect(allowed(ADMIN)).toEqual(['metrics', 'read', 'caller', 'admin']);
    expect(allowed(TOKEN)).toEqual(['metrics', 'read', 'caller']);
    expect(allowed(READ)).toEqual(['metrics', 'read']);
    expect(allowed(METRICS)).toEqual(['metrics']);
  });

  it('a valid token below the scope is a 403 naming the scope needed; an unknown one stays a 401', () => {
    const refusal = checkBearer(auth, `Bearer ${TOKEN}`, 'admin');
    expect(refusal).toEqual({
      ok: false,
      status: 403,
      reason: "this token's scope is caller; the request needs admin",
      error: 'insufficient_scope',
      scope: 'admin',
    });
    const answer = unauthorizedResponse(refusal as BearerRefusal);
    expect(answer.status).toBe(403);
    expect(answer.headers['www-authenticate']).toBe('Bearer realm="robustrl", error="insufficient_scope", scope="admin"');
    expect(checkBearer(auth, `Bearer ${ADMIN}x`, 'metrics')).toMatchObject({ ok: false, status: 401, error: 'invalid_token' });
  });

  it('a token given in two scopes is refused, naming both settings; admin tokens alone make a bearer listener', () => {
    expect(() => httpAuthFromEnv({ ROBUSTRL_HTTP_TOKENS: TOKEN, ROBUSTRL_HTTP_READ_TOKENS: TOKEN }, '0.0.0.0')).toThrow(
      /ROBUSTRL_HTTP_TOKENS: a token is also given as ROBUSTRL_HTTP_READ_TOKENS/,
    );
    const adminOnly = httpAuthFromEnv({ ROBUSTRL_HTTP_ADMIN_TOKENS: ADMIN }, '0.0.0.0');
    expect(adminOnly.kind).toBe('bearer');
    expect(checkBearer(adminOnly, `Bearer ${ADMIN}`).ok).toBe(true);
    expect(() => httpAuthFromEnv({ ROBUSTRL_HTTP_AUTH: 'none', ROBUSTRL_HTTP_METRICS_TOKENS: METRICS }, '0.0.0.0')).toThrow(/contradicts/);
  });

  it("a service's routes: /metrics needs metrics, other reads read, anything else caller", () => {
    expect(scopeOfServiceRequest('GET', '/metrics')).toBe('metrics');
    expect(scopeOfServiceRequest('GET', '/v1/jobs/j/ettr')).toBe('read');
    expect(scopeOfServiceRequest('HEAD', '/v1/trajectories/t')).toBe('read');
    expect(scopeOfServiceRequest('POST', '/v1/trajectories')).toBe('caller');
    expect(scopeOfServiceRequest('DELETE', '/v1/weights/targets/x')).toBe('caller');
  });
});

describe('a service behind bearer tokens (a real HTTP listener)', () => {
  let service: RunningService;
  let url: string;

  beforeAll(async () => {
    service = await runService(
      serviceConfigFromEnv('auth-spec', 0, { ROBUSTRL_HTTP_TOKENS: `${TOKEN},${ROTATED}`, ROBUSTRL_HTTP_METRICS_TOKENS: SCRAPE }),
      [],
      { logLevels: ['error'] },
    );
    url = await service.app.getUrl();
  });
  afterAll(() => service.stop());

  const get = (path: string, token?: string) => fetch(`${url}${path}`, token ? { headers: { authorization: `Bearer ${token}` } } : {});

  it('answers 401 with a Bearer challenge to calls without a valid token, on known and unknown paths alike', async () => {
    for (const path of ['/metrics', '/v1/jobs', '/no/such/path']) {
      for (const token of [undefined, 'wrong-token-0123456789']) {
        const res = await get(path, token);
        expect(res.status).toBe(401);
        // RFC 6750 §3.1: no error code when no credentials came; invalid_token for a wrong one.
        expect(res.headers.get('www-authenticate')).toBe(token ? 'Bearer realm="robustrl", error="invalid_token"' : 'Bearer realm="robustrl"');
        expect(await res.json()).toMatchObject({ statusCode: 401, error: 'Unauthorized' });
      }
    }
  });

  it('serves the holders of any of its tokens, and the probes without one', async () => {
    expect((await get('/metrics', TOKEN)).status).toBe(200);
    expect((await get('/metrics', ROTATED)).status).toBe(200);
    expect((await get('/no/such/path', TOKEN)).status).toBe(404);
    expect((await get('/healthz')).status).toBe(200);
    expect([200, 503]).toContain((await get('/readyz')).status);
  });

  it('a metrics token scrapes /metrics and nothing else: any other read or write is a 403 naming the scope', async () => {
    expect((await get('/metrics', SCRAPE)).status).toBe(200);
    const read = await get('/v1/jobs', SCRAPE);
    expect(read.status).toBe(403);
    expect(read.headers.get('www-authenticate')).toBe('Bearer realm="robustrl", error="insufficient_scope", scope="read"');
    expect(await read.json()).toMatchObject({ statusCode: 403, error: 'Forbidden', message: "this token's scope is metrics; the request needs read" });
    const write = await fetch(`${url}/v1/trajectories`, {
      method: 'POST',
      headers: { authorization: `Bearer ${SCRAPE}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(write.status).toBe(403);
  });
});

describe('tokens rotated on a running service, without a restart', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tokens-'));
  const file = join(dir, 'tokens');
  let service: RunningService;
  let url: string;

  beforeAll(async () => {
    writeFileSync(file, `${TOKEN}\n`);
    service = await runService(serviceConfigFromEnv('rotation-spec', 0, { ROBUSTRL_HTTP_TOKENS_FILE: file }), [], { logLevels: ['error'] });
    url = await service.app.getUrl();
  });
  afterAll(() => service.stop());

  const status = async (token: string) => (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).status;

  it('takes the new token alongside the old, then drops the old, on SIGHUP; a broken file keeps the tokens in force', async () => {
    expect([await status(TOKEN), await status(ROTATED)]).toEqual([200, 401]);
    writeFileSync(file, `${TOKEN}\n${ROTATED}\n`);
    process.emit('SIGHUP', 'SIGHUP');
    expect([await status(TOKEN), await status(ROTATED)]).toEqual([200, 200]);
    writeFileSync(file, `# the old one is gone\n${ROTATED}\n`);
    process.emit('SIGHUP', 'SIGHUP');
    expect([await status(TOKEN), await status(ROTATED)]).toEqual([401, 200]);
    writeFileSync(file, 'short\n');
    process.emit('SIGHUP', 'SIGHUP');
    expect(await status(ROTATED)).toBe(200);
  });

  it('reads the file again when it changes, without a signal', async () => {
    // A file of its own: node keeps one poller per file, at the interval of the first to watch it.
    const own = join(dir, 'own-tokens');
    writeFileSync(own, `${TOKEN}\n`);
    const auth = httpAuthFromEnv({ ROBUSTRL_HTTP_TOKENS_FILE: own }, '0.0.0.0');
    const lines: string[] = [];
    const stop = reloadTokens(auth, { ROBUSTRL_HTTP_TOKENS_FILE: own }, 'ROBUSTRL_HTTP', { intervalMs: 20, log: (l) => lines.push(l) });
    try {
      await new Promise((r) => setTimeout(r, 200)); // the watcher's first look, the one a change is seen against
      writeFileSync(own, `${ROTATED}\n`);
      for (let i = 0; i < 200 && !checkBearer(auth, `Bearer ${ROTATED}`).ok; i++) await new Promise((r) => setTimeout(r, 20));
      expect(checkBearer(auth, `Bearer ${ROTATED}`).ok).toBe(true);
      expect(checkBearer(auth, `Bearer ${TOKEN}`).ok).toBe(false);
      expect(lines).toContain('ROBUSTRL_HTTP_TOKENS: 1 token(s) in force');
    } finally {
      stop();
    }
  });
});
