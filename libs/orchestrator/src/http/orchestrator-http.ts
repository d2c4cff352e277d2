import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { Role } from '@robustrl/contracts';
import { checkBearer, HttpAuth, httpAuthFromEnv, limitServer, tokensFromEnv, unauthorizedResponse } from '@robustrl/service-kit';
import { z } from 'zod';
import { MachineSpec, Orchestrator, OrchestratorError } from '../orchestrator';
import { ORCHESTRATOR_URL } from '../orchestrator-settings';

/**
 * The orchestrator port over HTTP, both ends: `serveOrchestrator` puts any orchestrator behind an HTTP
 * API (a machine host that owns the job's machines), and `HttpOrchestrator` is the adapter a service
 * uses to reach it (ROBUSTRL_ORCHESTRATOR=http, ROBUSTRL_ORCHESTRATOR_URL).
 *
 * Why: an orchestrator that supervises processes must outlive the controller that calls it. A local
 * process supervisor inside the controller would take the job's machines down with it when the
 * controller is killed; behind this API it lives in its own process (the chaos campaign's machine
 * host, or a site's bare-metal launcher speaking the same API), and the controller can die and come
 * back mid-recovery. Idempotency per operationId stays the served orchestrator's: a command redelivered
 * after a controller crash reaches the same machine host and is answered with the first result.
 *
 *   GET  /v1/jobs/:job/machines                      → { machines: MachineSpec[] }
 *   POST /v1/jobs/:job/machines/:id/isolate          { operationId, reason }
 *   POST /v1/jobs/:job/machines                      { operationId, role, zone, hardwareClass, replaces? } → MachineSpec
 *   POST /v1/jobs/:job/machines/:id/release          { operationId, reason } → { machineId }
 *   POST /v1/jobs/:job/machines/restart              { operationId, machineIds }
 *   POST /v1/jobs/:job/restart                       { operationId }
 *
 * Errors: `{ error, retriable }` — 503 for a retriable OrchestratorError (the caller tries again), 409
 * for a final one, 400 for a request that does not parse. A network failure or an answer that is
 * not this API is retriable on the client side: the machine host may be restarting.
 *
 * Who may call it: these calls take machines out, add them and restart the task, so a machine host
 * reachable from other machines asks for a bearer token (`ROBUSTRL_ORCHESTRATOR_TOKENS` / `_FILE` on
 * both sides: the host accepts any of them, several during a rotation; the caller sends the first).
 * Bound to loopback without tokens it stays open; bound elsewhere without tokens it refuses to start
 * (service-kit's http-auth.ts rule). A 401 is final: the caller's token is wrong, asking again will not help.
 */
const MachineSpecBody = z.object({ machineId: z.string().min(1), role: Role, zone: z.string().min(1), hardwareClass: z.string().min(1) });
const Bodies = {
  isolate: z.object({ operationId: z.string().min(1), reason: z.string() }),
  request: z.object({
    operationId: z.string().min(1),
    role: Role,
    zone: z.string().min(1),
    hardwareClass: z.string().min(1),
    replaces: z.string().min(1).optional(),
  }),
  release: z.object({ operationId: z.string().min(1), reason: z.string() }),
  restartMachines: z.object({ operationId: z.string().min(1), machineIds: z.array(z.string().min(1)) }),
  restartTask: z.object({ operationId: z.string().min(1) }),
};
const ErrorBody = z.object({ error: z.string(), retriable: z.boolean() });
/** The settings of the machine host's tokens, on both sides: `ROBUSTRL_ORCHESTRATOR_TOKENS` / `_FILE` / `_AUTH`. */
export const TOKEN_SETTING = 'ROBUSTRL_ORCHESTRATOR';

/**
 * Serves `orchestrator` on host:port (0: any free port); resolves with the server and its base URL.
 * `auth`: who may call (default: open on loopback, else refused: see the module doc).
 */
export async function serveOrchestrator(
  orchestrator: Orchestrator,
  options: { port?: number; host?: string; auth?: HttpAuth } = {},
): Promise<{ server: Server; url: string }> {
  const auth = options.auth ?? httpAuthFromEnv({}, options.host ?? '127.0.0.1', TOKEN_SETTING);
  const server = limitServer(
    createServer((req, res) => {
      const verdict = checkBearer(auth, req.headers.authorization);
      if (!verdict.ok) {
        req.resume();
        const refused = unauthorizedResponse(verdict);
        return void res.writeHead(refused.status, refused.headers).end(refused.body);
      }
      void handle(orchestrator, req, res);
    }),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  return { server, url: `http://${address.includes(':') ? `[${address}]` : address}:${port}` };
}

async function handle(orchestrator: Orchestrator, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const send = (status: number, body: unknown) => {
    const raw = JSON.stringify(body ?? {});
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(raw) }).end(raw);
  };
  try {
    const path = (req.url ?? '/').split('?')[0];
    const m = /^\/v1\/jobs\/([^/]+)\/(machines(?:\/([^/]+)(?:\/(isolate|release))?)?|restart)$/.exec(path);
    if (!m) return send(404, { error: `no route ${req.method} ${path}`, retriable: false });
    const jobId = decodeURIComponent(m[1]);
    const machineId = m[3] === undefined ? undefined : decodeURIComponent(m[3]);
    const action = m[4];
    if (req.method === 'GET' && m[2] === 'machines') return send(200, { machines: await orchestrator.listMachines(jobId) });
    if (req.method !== 'POST') return send(405, { error: `${req.method} is not allowed on ${path}`, retriable: false });
    const body = await readJson(req);
    if (m[2] === 'restart') {
      await orchestrator.restartTask({ ...Bodies.restartTask.parse(body), jobId });
      return send(200, {});
    }
    if (machineId === 'restart' && action === undefined) {
      await orchestrator.restartMachines({ ...Bodies.restartMachines.parse(body), jobId });
      return send(200, {});
    }
    if (machineId === undefined) return send(200, await orchestrator.requestMachine({ ...Bodies.request.parse(body), jobId }));
    if (action === 'isolate') {
      await orchestrator.isolateMachine({ ...Bodies.isolate.parse(body), jobId, machineId });
      return send(200, {});
    }
    if (action === 'release') return send(200, { machineId: await orchestrator.releaseMachine({ ...Bodies.release.parse(body), jobId, machineId }) });
    return send(404, { error: `no route ${req.method} ${path}`, retriable: false });
  } catch (err) {
    if (err instanceof z.ZodError || err instanceof SyntaxError) return send(400, { error: `invalid request: ${err.message}`, retriable: false });
    if (err instanceof OrchestratorError) return send(err.retriable ? 503 : 409, { error: err.message, retriable: err.retriable });
    return send(500, { error: String(err), retriable: true });
  }
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 1 << 20) throw new SyntaxError('the body is larger than 1 MiB');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : {};
}

/** The orchestrator port as a client of a machine host serving it over HTTP (see the module doc). */
export class HttpOrchestrator implements Orchestrator {
  readonly kind = 'http' as const;

  constructor(
    private readonly baseUrl: string,
    /** Per call; requestMachine waits for the machine to run, so it gets `machineTimeoutMs`. */
    private readonly options: { timeoutMs?: number; machineTimeoutMs?: number; token?: string } = {},
  ) {}

  static fromEnv(env: NodeJS.ProcessEnv): HttpOrchestrator {
    const url = ORCHESTRATOR_URL.read(env);
    if (!url) throw new Error("ROBUSTRL_ORCHESTRATOR=http needs ROBUSTRL_ORCHESTRATOR_URL, the machine host's base URL (http://host:port)");
    const [token] = tokensFromEnv(env, TOKEN_SETTING);
    return new HttpOrchestrator(url.replace(/\/+$/, ''), { token });
  }

  async listMachines(jobId: string): Promise<MachineSpec[]> {
    const answer = await this.call('GET', `/v1/jobs/${encodeURIComponent(jobId)}/machines`);
    return z.object({ machines: z.array(MachineSpecBody) }).parse(answer).machines;
  }

  async isolateMachine(r: { operationId: string; jobId: string; machineId: string; reason: string }): Promise<void> {
    await this.call('POST', `${this.machine(r.jobId, r.machineId)}/isolate`, { operationId: r.operationId, reason: r.reason });
  }

  async requestMachine(r: { operationId: string; jobId: string; role: Role; zone: string; hardwareClass: string; replaces?: string }): Promise<MachineSpec> {
    const { jobId, ...body } = r;
    const answer = await this.call('POST', `/v1/jobs/${encodeURIComponent(jobId)}/machines`, body, this.options.machineTimeoutMs ?? 120_000);
    return MachineSpecBody.parse(answer);
  }

  async releaseMachine(r: { operationId: string; jobId: string; machineId: string; reason: string }): Promise<string> {
    const answer = await this.call(
      'POST',
      `${this.machine(r.jobId, r.machineId)}/release`,
      { operationId: r.operationId, reason: r.reason },
      this.options.machineTimeoutMs ?? 120_000,
    );
    return z.object({ machineId: z.string().min(1) }).parse(answer).machineId;
  }

  async restartMachines(r: { operationId: string; jobId: string; machineIds: string[] }): Promise<void> {
    await this.call(
      'POST',
      `/v1/jobs/${encodeURIComponent(r.jobId)}/machines/restart`,
      { operationId: r.operationId, machineIds: r.machineIds },
      this.options.machineTimeoutMs ?? 120_000,
    );
  }

  async restartTask(r: { operationId: string; jobId: string }): Promise<void> {
    await this.call('POST', `/v1/jobs/${encodeURIComponent(r.jobId)}/restart`, { operationId: r.operationId }, this.options.machineTimeoutMs ?? 120_000);
  }

  async close(): Promise<void> {
    // Nothing held: every call is its own request. The machines belong to the machine host.
  }

  private machine(jobId: string, machineId: string): string {
    return `/v1/jobs/${encodeURIComponent(jobId)}/machines/${encodeURIComponent(machineId)}`;
  }

  private async call(method: 'GET' | 'POST', path: string, body?: unknown, timeoutMs = this.options.timeoutMs ?? 30_000): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(this.options.token ? { authorization: `Bearer ${this.options.token}` } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      throw new OrchestratorError(`machine host at ${this.baseUrl} did not answer ${method} ${path}: ${describe(err)}`, true, { cause: err });
    }
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : {};
    } catch {
      throw new OrchestratorError(`machine host answered ${res.status} to ${method} ${path} with a body that is not JSON: ${text.slice(0, 200)}`, true);
    }
    if (res.ok) return parsed;
    if (res.status === 401) {
      throw new OrchestratorError(
        `machine host at ${this.baseUrl} refused ${method} ${path}: ${this.options.token ? 'its token is not one the host accepts' : 'it asks for a token'} ` +
          `(set ${TOKEN_SETTING}_TOKENS or ${TOKEN_SETTING}_TOKENS_FILE to one of the host's)`,
        false,
      );
    }
    const error = ErrorBody.safeParse(parsed);
    const message = error.success ? error.data.error : text.slice(0, 300);
    // A final answer only when the host says so; anything else (a proxy's 502, a host mid-restart) may pass.
    const retriable = error.success ? error.data.retriable : res.status >= 500;
    throw new OrchestratorError(`machine host refused ${method} ${path} (${res.status}): ${message}`, retriable);
  }
}

function describe(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
}
