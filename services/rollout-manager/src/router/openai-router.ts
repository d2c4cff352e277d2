import { Agent, createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { MessageBus } from '@robustrl/bus';
import { BearerRefusal, checkBearer, HttpAuth, limitServer, unauthorizedResponse } from '@robustrl/service-kit';
import { EnginePool } from './engine-pool';
import { Failover } from './failover';
import { DEFAULT_ENGINE_ANSWER_BYTES, readAll, send } from './http-transport';
import { sendError } from './openai-responses';
import { ReassignmentEvents } from './reassignment-events';
import { EngineKind } from './engines';
import { isIdList } from './engines/engine-adapter';
import { replay } from './replay-response';
import { RequestEvidence } from './request-evidence';
import { RequestContext } from './request-context';
import { RouterLogger, RouterStats, stderrRouterLogger } from './router-reporting';
import { Api, Json } from './stream-splice';
import { ThroughputMeter } from './throughput-meter';
import { ToolIterationLiveness } from './tool-liveness';
import { identityFromHeaders, RESTARTED_HEADER, ROLLOUT_HEADER, TRAJECTORY_HEADER, TrajectoryIdentity } from './trajectory-identity';
import { TrajectoryRecorder } from './trajectory-recorder';
import { handleMembership, membershipScope } from './worker-membership';
import { ContinuationSettings, TrajectoryRecording } from './trajectory-recording';

export type { RouterLogger, RouterStats } from './router-reporting';
export type { ContinuationSettings } from './trajectory-recording';

/**
 * How long the router keeps an idle caller connection open: longer than the pools of its callers and
 * their balancers (httpx and undici expire idle sockets after 4–5 s, load balancers after about 60 s).
 * A server that closes first races a caller reusing the socket at that moment, and the caller's
 * request fails with a reset connection (docs/router.md "The lean path").
 */
export const ROUTER_KEEP_ALIVE_MS = 65_000;

/**
 * The OpenAI-compatible endpoint agent loops point at instead of a rollout engine (paper §3: the
 * AgentWorker calls the inference engine; §5.2.2: a rollout that dies mid-trajectory loses nothing).
 *
 *   POST /v1/chat/completions, POST /v1/completions   streaming (SSE) or not
 *   GET  /v1/models                                   from any living engine
 *   GET  /health                                      200 while an engine is alive, else 503: `{alive}`, liveness only
 *   GET  /v1/engines                                  every engine: id, machine, URL, version, liveness
 *   /workers, /add_worker, /remove_worker, /list_workers, /readiness: the membership API of SGLang's
 *                                                     Model Gateway (worker-membership.ts)
 *
 * With `auth` holding tokens, every path but the probes (/health, /liveness, /readiness, which tell
 * nothing but liveness) needs `Authorization: Bearer <token>` — what an OpenAI client sends as its API
 * key — and is answered 401 otherwise. Scopes (service-kit's http-auth.ts): generation needs a caller
 * token (`ROBUSTRL_ROUTER_TOKENS`), a GET a read token or above, adding or removing an engine an admin
 * token (`ROBUSTRL_ROUTER_ADMIN_TOKENS`); a valid token below the scope is answered 403.
 *
 * Identity headers (see trajectory-identity.ts): x-robustrl-job, x-robustrl-prompt, x-robustrl-sample
 * (all three to record; none: proxied, not recorded; some: 400), optional x-robustrl-batch,
 * x-robustrl-step. Responses carry x-robustrl-rollout (the engine that served, or first served, the
 * request) and x-robustrl-trajectory.
 *
 * Per recorded request: the new input turns are stored before generation, the answer after it; the
 * requests of one trajectory are serialised. A retried request whose answer is already stored gets
 * the stored answer back (nothing is generated again). A trajectory whose generated turns are older than
 * its engine's weights goes through the job's continuation policy; when the store restarts it from its
 * prompt, the caller gets 409 `TrajectoryRestartedError` (header x-robustrl-restarted: the reason) and
 * must start it again from the prompt. Failover: a connection error, a stream that
 * ends before [DONE], an idle upstream, or a 5xx takes the engine out and the request goes on on
 * another: resent if nothing reached the caller yet, else continued from the forwarded text.
 *
 * This class is the HTTP surface: routes, request parsing, the responses it answers itself. It hands
 * generation to failover (failover.ts: engine choice, liveness after tool iterations, continuation on
 * another engine) and recorded requests to recording (trajectory-recording.ts: turns to the request
 * manager through the recorder port).
 */
export interface OpenAiRouterOptions {
  pool: EnginePool;
  /** Who may call it (default: anyone, for a router on loopback; see http-auth.ts). */
  auth?: HttpAuth;
  /** Where trajectories are recorded; without one nothing is recorded. */
  recorder?: TrajectoryRecorder;
  /**
   * What happens to a recorded trajectory that goes on with newer weights than its generated turns
   * (trajectory-recording.ts): default `keep`, unbounded.
   */
  continuation?: ContinuationSettings;
  /** The adapter of workers added through the membership API without a `runtime` (default vllm). */
  defaultEngineKind?: EngineKind;
  /** Where failover events go (TrajectoriesReassigned, TrajectoryStatusChanged 'reassigned'). */
  bus?: MessageBus;
  /** Counts what each engine generates, for the throughput the detector's rollout rule watches. */
  meter?: ThroughputMeter;
  /** Collects each engine's request stalls and failures, for the detector's rollout-requests rule. */
  evidence?: RequestEvidence;
  /**
   * Probe a trajectory's engine before its next turn when the trajectory comes back from a tool call
   * (paper §3: the rollout manager checks liveness after each tool iteration). A tool call can take
   * minutes; the engine may have died silently meanwhile, and a request to a hung machine would wait
   * for the idle timeout instead of moving on. Default true.
   */
  livenessCheckAfterTools?: boolean;
  /** Envelope `source` of the events. */
  source?: string;
  /** Refuse (400) generation requests without identity headers instead of proxying them unrecorded. */
  requireIdentity?: boolean;
  /** How long a request waits for a living engine before it is answered 503. */
  noEngineDeadlineMs?: number;
  backoff?: { initialMs: number; maxMs: number };
  /** An engine silent this long during a request is taken as dead. */
  upstreamIdleTimeoutMs?: number;
  /** The most an engine's whole answer may weigh before the router stops reading it (64 MiB). */
  maxEngineAnswerBytes?: number;
  /** Engines tried per request before giving up (bounds a storm of engines that accept and die). */
  maxAttempts?: number;
  maxBodyBytes?: number;
  logger?: RouterLogger;
  now?: () => Date;
}

export class OpenAiRouter {
  readonly stats: RouterStats = { requests: 0, failovers: 0, replays: 0, recordingErrors: 0, noEngine503: 0 };
  private readonly server: Server;
  private readonly agent = new Agent({ keepAlive: true });
  private readonly pool: EnginePool;
  private readonly log: RouterLogger;
  private readonly maxBodyBytes: number;
  private readonly events: ReassignmentEvents;
  private readonly failover: Failover;
  /** Absent without a recorder: nothing is recorded. */
  private readonly recording: TrajectoryRecording | undefined;

  constructor(private readonly config: OpenAiRouterOptions) {
    this.pool = config.pool;
    this.log = config.logger ?? stderrRouterLogger;
    this.maxBodyBytes = config.maxBodyBytes ?? 64 * 1024 * 1024;
    this.events = new ReassignmentEvents(config.bus, config.source ?? 'rollout-manager/router', this.log, config.now);
    this.failover = new Failover({
      pool: this.pool,
      agent: this.agent,
      stats: this.stats,
      log: this.log,
      events: this.events,
      liveness: new ToolIterationLiveness(this.pool, config.livenessCheckAfterTools !== false, this.log),
      meter: config.meter,
      evidence: config.evidence,
      noEngineDeadlineMs: config.noEngineDeadlineMs ?? 30_000,
      upstreamIdleTimeoutMs: config.upstreamIdleTimeoutMs ?? 300_000,
      maxAnswerBytes: config.maxEngineAnswerBytes,
      maxAttempts: config.maxAttempts ?? 16,
      backoff: config.backoff ?? { initialMs: 50, maxMs: 1_000 },
    });
    this.recording = config.recorder ? new TrajectoryRecording(config.recorder, this.pool, this.stats, this.log, config.continuation) : undefined;
    this.server = limitServer(
      createServer((req, res) => void this.handle(req, res)),
      { keepAliveTimeoutMs: ROUTER_KEEP_ALIVE_MS },
    );
  }

  async listen(port = 0, host = '127.0.0.1'): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    return this.url;
  }

  get url(): string {
    const address = this.server.address() as AddressInfo | null;
    if (!address) throw new Error('the router is not listening');
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `http://${host}:${address.port}`;
  }

  /** Stop accepting, let open responses finish, flush the events. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      if (!this.server.listening) return resolve();
      this.server.close(() => resolve());
      this.server.closeIdleConnections();
    });
    await this.flushEvents();
    this.agent.destroy();
  }

  /** Resolves when every event published so far is on the bus (they are published off the request path). */
  async flushEvents(): Promise<void> {
    await this.events.flush();
  }

  /** The request handler, for mounting in another HTTP server. */
  readonly handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    res.on('error', () => undefined);
    try {
      const path = (req.url ?? '/').split('?')[0].replace(/\/+$/, '');
      if (req.method === 'GET' && path === '/health') return this.health(res);
      // A gateway's probes, answered without a token like /health (orchestrators probe without one).
      if (req.method === 'GET' && (path === '/liveness' || path === '/readiness')) return void (await handleMembership(req, res, path, this.pool, 'vllm'));
      if (this.config.auth) {
        const need = membershipScope(req.method ?? 'GET', path) ?? (req.method === 'GET' ? 'read' : 'caller');
        const verdict = checkBearer(this.config.auth, req.headers.authorization, need);
        if (!verdict.ok) return this.unauthorized(res, verdict);
      }
      // Generation first: it is nearly every request.
      if (req.method === 'POST' && (path === '/v1/chat/completions' || path === '/v1/completions')) {
        return await this.generation(path === '/v1/chat/completions' ? 'chat' : 'completions', path, req, res);
      }
      if (req.method === 'GET' && path === '/v1/models') return await this.models(res);
      if (req.method === 'GET' && path === '/v1/engines') return this.engines(res);
      if (await handleMembership(req, res, path, this.pool, this.config.defaultEngineKind ?? 'vllm')) return;
      sendError(res, 404, 'NotFoundError', `no route ${req.method} ${path}`);
    } catch (err) {
      this.log.error('request failed', { error: String(err) });
      if (!res.headersSent) sendError(res, 500, 'InternalServerError', 'the router failed: ' + String(err));
      else res.destroy();
    }
  };

  /** OpenAI's shape for a bad API key, with RFC 6750's challenge. */
  private unauthorized(res: ServerResponse, refusal: BearerRefusal): void {
    const code = refusal.status === 403 ? 'insufficient_scope' : 'invalid_api_key';
    const body = JSON.stringify({ error: { message: refusal.reason, type: 'invalid_request_error', param: null, code } });
    const answer = unauthorizedResponse(refusal);
    res.writeHead(answer.status, { ...answer.headers, 'content-length': Buffer.byteLength(body) }).end(body);
  }

  /** Probed without a token: how many engines live, not which (their addresses and machines are the job's). */
  private health(res: ServerResponse): void {
    const alive = this.pool.snapshot().filter((e) => e.alive).length;
    res.writeHead(alive > 0 ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ alive }));
  }

  private engines(res: ServerResponse): void {
    const engines = this.pool.snapshot();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ alive: engines.filter((e) => e.alive).length, engines }));
  }

  /** Any living engine's model list: a plain pass-through, no failover beyond trying the next engine. */
  private async models(res: ServerResponse): Promise<void> {
    const tried = new Set<string>();
    for (;;) {
      const lease = this.pool.acquire(null, tried);
      if (!lease) return this.noEngine(res);
      tried.add(lease.engine.id);
      try {
        const upstream = await send(`${lease.engine.baseUrl}/v1/models`, 'GET', null, { agent: this.agent, idleTimeoutMs: 10_000 });
        const body = await readAll(upstream, this.config.maxEngineAnswerBytes ?? DEFAULT_ENGINE_ANSWER_BYTES);
        if ((upstream.statusCode ?? 500) >= 500) continue;
        res.writeHead(upstream.statusCode ?? 200, { 'content-type': 'application/json', [ROLLOUT_HEADER]: lease.engine.id }).end(body);
        return;
      } catch (err) {
        this.pool.markDead(lease.engine.id, String(err));
      } finally {
        lease.release();
      }
    }
  }

  private async generation(api: Api, path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.stats.requests += 1;
    let body: Json;
    try {
      const parsed: unknown = JSON.parse((await readAll(req, this.maxBodyBytes)).toString('utf8'));
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('the body is not a JSON object');
      body = parsed as Json;
    } catch (err) {
      return sendError(res, 400, 'BadRequestError', `invalid request body: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (api === 'chat' && !Array.isArray(body.messages)) return sendError(res, 400, 'BadRequestError', '`messages` must be an array');
    if (api === 'completions' && body.prompt === undefined) return sendError(res, 400, 'BadRequestError', '`prompt` is required');
    const identity = identityFromHeaders(req.headers);
    if (!identity.ok) return sendError(res, 400, 'BadRequestError', identity.message);
    if (identity.identity === null && this.config.requireIdentity) {
      return sendError(res, 400, 'BadRequestError', 'trajectory identity headers are required: x-robustrl-job, x-robustrl-prompt, x-robustrl-sample');
    }
    const ctx: RequestContext = {
      api,
      path,
      body,
      stream: body.stream === true,
      identity: identity.identity,
      outputIndex: null,
      res,
      abort: new AbortController(),
    };
    const recording = this.recording;
    if (ctx.identity === null || recording === undefined) {
      // Nobody records this answer, so nobody wants it once the caller is gone.
      res.on('close', () => {
        if (!res.writableFinished) ctx.abort.abort();
      });
      await this.failover.generate(ctx);
      return;
    }
    const identityOf = ctx.identity;
    if (api === 'completions' && typeof body.prompt !== 'string' && !(isIdList(body.prompt) && body.prompt.length > 0)) {
      return sendError(res, 400, 'BadRequestError', 'a recorded completions request needs one prompt: a string or a list of token ids');
    }
    if (typeof body.n === 'number' && body.n > 1)
      return sendError(res, 400, 'BadRequestError', 'a recorded request is one sample: n must be 1 (use x-robustrl-sample per sample)');
    res.setHeader(TRAJECTORY_HEADER, identityOf.trajectoryId);
    await recording.exclusive(identityOf.trajectoryId, () => this.recordedGeneration(ctx, identityOf, recording));
  }

  /** A recorded request: recording says what the store allows (generate, replay, refuse); failover generates. */
  private async recordedGeneration(ctx: RequestContext, identity: TrajectoryIdentity, recording: TrajectoryRecording): Promise<void> {
    const plan = await recording.prepare(ctx.api, ctx.body, identity);
    if (plan.kind === 'store-unavailable') {
      ctx.res.setHeader('retry-after', '2');
      return sendError(ctx.res, 503, 'ServiceUnavailableError', `trajectory ${identity.trajectoryId}: ${plan.message}; ask again`);
    }
    if (plan.kind === 'refused') return sendError(ctx.res, 400, 'BadRequestError', `trajectory ${identity.trajectoryId}: ${plan.message}`);
    if (plan.kind === 'conflict') return sendError(ctx.res, 409, 'ConflictError', `trajectory ${identity.trajectoryId}: ${plan.message}`);
    if (plan.kind === 'restarted') {
      ctx.res.setHeader(RESTARTED_HEADER, plan.reason);
      return sendError(ctx.res, 409, 'TrajectoryRestartedError', plan.message);
    }
    if (plan.kind === 'replay') {
      this.stats.replays += 1;
      return replay(ctx, plan.content);
    }
    ctx.outputIndex = plan.outputIndex;
    // The answer is stored before the caller has all of it (see RequestContext.beforeAnswer).
    ctx.beforeAnswer = (answer) => recording.recordAnswer(identity, ctx.api, plan, answer);
    await this.failover.generate(ctx);
  }

  private noEngine(res: ServerResponse): void {
    this.stats.noEngine503 += 1;
    res.setHeader('retry-after', '5');
    sendError(res, 503, 'ServiceUnavailableError', 'no living rollout engine');
  }
}
