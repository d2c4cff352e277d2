import { Agent, createServer, IncomingMessage, request as httpRequest, Server, ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { AddressInfo } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import { MessageBus } from '@robustrl/bus';
import { createMessage } from '@robustrl/contracts';
import { EnginePool, EngineView } from './engine-pool';
import { Api, continuationBody, Json, resumable, StreamSplice } from './stream-splice';
import { ThroughputMeter } from './throughput-meter';
import { identityFromHeaders, ROLLOUT_HEADER, TRAJECTORY_HEADER, TrajectoryIdentity } from './trajectory-identity';
import { RecordedTurn, TrajectoryRecorder, TurnKind } from './trajectory-recorder';
import { planTurns, splitChatConversation, splitCompletionPrompt, TurnDraft, turnIdOf, TurnPlan } from './turn-plan';

/**
 * The OpenAI-compatible endpoint agent loops point at instead of a rollout engine (paper §3: the
 * AgentWorker calls the inference engine; §5.2.2: a rollout that dies mid-trajectory loses nothing).
 *
 *   POST /v1/chat/completions, POST /v1/completions   streaming (SSE) or not
 *   GET  /v1/models                                   from any living engine
 *   GET  /health                                      200 while an engine is alive, else 503
 *
 * Identity headers (see trajectory-identity.ts): x-robustrl-job, x-robustrl-prompt, x-robustrl-sample
 * (all three to record; none: proxied, not recorded; some: 400), optional x-robustrl-batch,
 * x-robustrl-step. Responses carry x-robustrl-rollout (the engine that served, or first served, the
 * request) and x-robustrl-trajectory.
 *
 * Per recorded request: the new input turns are stored before generation, the answer after it; the
 * requests of one trajectory are serialised. A retried request whose answer is already stored gets
 * the stored answer back (nothing is generated again). Failover: a connection error, a stream that
 * ends before [DONE], an idle upstream, or a 5xx takes the engine out and the request goes on on
 * another: resent if nothing reached the caller yet, else continued from the forwarded text.
 */
export interface OpenAiRouterOptions {
  pool: EnginePool;
  /** Where trajectories are recorded; without one nothing is recorded. */
  recorder?: TrajectoryRecorder;
  /** Where failover events go (TrajectoriesReassigned, TrajectoryStatusChanged 'reassigned'). */
  bus?: MessageBus;
  /** Counts what each engine generates, for the throughput the detector's rollout rule watches. */
  meter?: ThroughputMeter;
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
  /** Engines tried per request before giving up (bounds a storm of engines that accept and die). */
  maxAttempts?: number;
  maxBodyBytes?: number;
  logger?: RouterLogger;
  now?: () => Date;
}

export interface RouterLogger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

const stderrRouterLogger: RouterLogger = {
  info: () => undefined,
  warn: (msg, fields) => process.stderr.write(`[router] WARN ${msg} ${fields ? JSON.stringify(fields) : ''}\n`),
  error: (msg, fields) => process.stderr.write(`[router] ERROR ${msg} ${fields ? JSON.stringify(fields) : ''}\n`),
};

export interface RouterStats {
  requests: number;
  failovers: number;
  replays: number;
  recordingErrors: number;
  noEngine503: number;
}

/** Why an attempt on one engine ended without an answer. */
interface AttemptFailure {
  kind: 'failed';
  reason: string;
  /** The engine itself is gone (connection error, cut stream, idle): mark it dead. Else (5xx, bad stream) only skip it for this request. */
  engineDown: boolean;
  /** The engine's own error answer, relayed if every engine answers so. */
  status?: number;
  body?: Buffer;
}

interface Answer {
  /** Chat: the assistant message; completions: the text. */
  content: unknown;
  finishReason: string | null;
  tokens: number;
  engines: EngineView[];
}

type AttemptOutcome = { kind: 'done'; answer: Answer } | { kind: 'relayed' } | AttemptFailure;

interface RequestContext {
  api: Api;
  path: string;
  body: Json;
  stream: boolean;
  identity: TrajectoryIdentity | null;
  /** Index the answer will have in the trajectory (null: not recorded). */
  outputIndex: number | null;
  res: ServerResponse;
  /** Aborted when an unrecorded request's caller goes away: nobody wants the rest. */
  abort: AbortController;
}

class UpstreamError extends Error {}

export class OpenAiRouter {
  readonly stats: RouterStats = { requests: 0, failovers: 0, replays: 0, recordingErrors: 0, noEngine503: 0 };
  private readonly server: Server;
  private readonly agent = new Agent({ keepAlive: true });
  private readonly pool: EnginePool;
  private readonly log: RouterLogger;
  private readonly locks = new Map<string, Promise<void>>();
  /** Completions: each trajectory's first prompt, so later prompts split into segments unambiguously. */
  private readonly completionBases = new Map<string, string>();
  private readonly pendingEvents = new Set<Promise<void>>();
  /** Trajectories whose last answer was a tool call: their next turn starts with a liveness check. */
  private readonly backFromTools = new Map<string, string>();
  private readonly options: Required<Pick<OpenAiRouterOptions, 'noEngineDeadlineMs' | 'upstreamIdleTimeoutMs' | 'maxAttempts' | 'maxBodyBytes' | 'source'>> & {
    backoff: { initialMs: number; maxMs: number };
  };

  constructor(private readonly config: OpenAiRouterOptions) {
    this.pool = config.pool;
    this.log = config.logger ?? stderrRouterLogger;
    this.options = {
      noEngineDeadlineMs: config.noEngineDeadlineMs ?? 30_000,
      upstreamIdleTimeoutMs: config.upstreamIdleTimeoutMs ?? 300_000,
      maxAttempts: config.maxAttempts ?? 16,
      maxBodyBytes: config.maxBodyBytes ?? 64 * 1024 * 1024,
      source: config.source ?? 'rollout-manager/router',
      backoff: config.backoff ?? { initialMs: 50, maxMs: 1_000 },
    };
    this.server = createServer((req, res) => void this.handle(req, res));
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
    while (this.pendingEvents.size > 0) await Promise.all([...this.pendingEvents]);
  }

  /** The request handler, for mounting in another HTTP server. */
  readonly handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    res.on('error', () => undefined);
    try {
      const path = (req.url ?? '/').split('?')[0].replace(/\/+$/, '');
      if (req.method === 'GET' && path === '/health') return this.health(res);
      if (req.method === 'GET' && path === '/v1/models') return await this.models(res);
      if (req.method === 'POST' && (path === '/v1/chat/completions' || path === '/v1/completions')) {
        return await this.generation(path === '/v1/chat/completions' ? 'chat' : 'completions', path, req, res);
      }
      sendError(res, 404, 'NotFoundError', `no route ${req.method} ${path}`);
    } catch (err) {
      this.log.error('request failed', { error: String(err) });
      if (!res.headersSent) sendError(res, 500, 'InternalServerError', 'the router failed: ' + String(err));
      else res.destroy();
    }
  };

  private health(res: ServerResponse): void {
    const engines = this.pool.snapshot();
    const body = JSON.stringify({ alive: engines.filter((e) => e.alive).length, engines });
    res.writeHead(engines.some((e) => e.alive) ? 200 : 503, { 'content-type': 'application/json' }).end(body);
  }

  private async models(res: ServerResponse): Promise<void> {
    const tried = new Set<string>();
    for (;;) {
      const lease = this.pool.acquire(null, tried);
      if (!lease) return this.noEngine(res);
      tried.add(lease.engine.id);
      try {
        const upstream = await send(`${lease.engine.baseUrl}/v1/models`, 'GET', null, { agent: this.agent, idleTimeoutMs: 10_000 });
        const body = await readAll(upstream);
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
      const parsed: unknown = JSON.parse((await readAll(req, this.options.maxBodyBytes)).toString('utf8'));
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
    const ctx: RequestContext = { api, path, body, stream: body.stream === true, identity: identity.identity, outputIndex: null, res, abort: new AbortController() };
    const recorder = this.config.recorder;
    if (ctx.identity === null || recorder === undefined) {
      // Nobody records this answer, so nobody wants it once the caller is gone.
      res.on('close', () => {
        if (!res.writableFinished) ctx.abort.abort();
      });
      await this.generate(ctx);
      return;
    }
    const identityOf = ctx.identity;
    if (api === 'completions' && typeof body.prompt !== 'string') {
      return sendError(res, 400, 'BadRequestError', 'a recorded completions request needs a single string prompt');
    }
    if (typeof body.n === 'number' && body.n > 1) return sendError(res, 400, 'BadRequestError', 'a recorded request is one sample: n must be 1 (use x-robustrl-sample per sample)');
    res.setHeader(TRAJECTORY_HEADER, identityOf.trajectoryId);
    // One request per trajectory at a time: a retry that overlaps the original waits for it and then
    // finds its answer stored, instead of generating a second, different answer for the same turn.
    await this.withTrajectoryLock(identityOf.trajectoryId, () => this.recordedGeneration(ctx, identityOf, recorder));
  }

  private async recordedGeneration(ctx: RequestContext, identity: TrajectoryIdentity, recorder: TrajectoryRecorder): Promise<void> {
    let stored;
    try {
      stored = await recorder.prefix(identity.trajectoryId);
    } catch (err) {
      // The trajectory store is down: serve the agent anyway (its progress is what matters now), unrecorded.
      this.recordingFailed('prefix', identity, err);
      await this.generate(ctx);
      return;
    }
    let prompt: unknown;
    let plan: TurnPlan;
    if (ctx.api === 'chat') {
      const split = splitChatConversation(ctx.body.messages as Parameters<typeof splitChatConversation>[0]);
      prompt = split.prompt;
      plan = planTurns(split.turns, stored);
    } else {
      const split = splitCompletionPrompt(ctx.body.prompt as string, stored, this.completionBases.get(identity.trajectoryId));
      if ('conflict' in split) plan = { kind: 'conflict', message: split.conflict };
      else {
        prompt = split.base;
        this.completionBases.set(identity.trajectoryId, split.base);
        plan = planTurns(split.turns, stored);
      }
    }
    if (plan.kind === 'conflict') return sendError(ctx.res, 409, 'ConflictError', `trajectory ${identity.trajectoryId}: ${plan.message}`);
    if (plan.kind === 'replay') {
      this.stats.replays += 1;
      return replay(ctx, plan.turn.content);
    }
    ctx.outputIndex = plan.outputIndex;
    // The new inputs (tool results) are stored before generation: if everything dies now, they are kept.
    const inputVersion = this.pool.pick(identity.trajectoryId)?.weightVersion ?? 0;
    await this.record(identity, async () => {
      await recorder.start({ ...pick(identity), prompt });
      if (plan.append.length > 0) {
        await recorder.appendTurns(plan.append.map((t) => this.turn(identity, t.turnIndex, t, null, inputVersion, 0)));
      }
    });
    const answer = await this.generate(ctx);
    if (!answer) return;
    const kind: TurnKind = ctx.api === 'chat' && Array.isArray((answer.content as Json).tool_calls) ? 'tool-call' : 'model-output';
    const last = answer.engines[answer.engines.length - 1];
    // A turn continued across engines was generated with the oldest of their weights: the conservative bound on its staleness.
    const weightVersion = Math.min(...answer.engines.map((e) => e.weightVersion));
    await this.record(identity, () =>
      recorder.appendTurns([this.turn(identity, plan.outputIndex, { kind, content: answer.content }, last.id, weightVersion, answer.tokens)]),
    );
  }

  private turn(identity: TrajectoryIdentity, turnIndex: number, draft: TurnDraft, rolloutId: string | null, weightVersion: number, tokens: number): RecordedTurn {
    return {
      trajectoryId: identity.trajectoryId,
      turnId: turnIdOf(identity.trajectoryId, turnIndex, draft.content),
      turnIndex,
      kind: draft.kind,
      content: draft.content,
      rolloutId,
      weightVersion,
      tokens,
    };
  }

  /** A store failure is logged, not answered: the agent's progress comes first, and the store's own retries are its business. */
  private async record(identity: TrajectoryIdentity, write: () => Promise<void>): Promise<void> {
    try {
      await write();
    } catch (err) {
      this.recordingFailed('append', identity, err);
    }
  }

  private recordingFailed(what: string, identity: TrajectoryIdentity, err: unknown): void {
    this.stats.recordingErrors += 1;
    this.log.error(`recording failed (${what})`, { trajectoryId: identity.trajectoryId, error: String(err) });
  }

  /**
   * Serve the request on living engines until it is answered. Returns the answer, or null when the
   * caller got an error (or an engine's own 4xx) instead.
   */
  /** Throughput per engine for the detector; a trajectory answered with a tool call now waits on its tool (and is checked on return). */
  private metered(ctx: RequestContext, engine: EngineView, answer: { content: unknown; tokens: number }): void {
    this.config.meter?.answered(engine.id, answer.tokens);
    if (ctx.identity === null) return;
    const toolCall = ctx.api === 'chat' && Array.isArray((answer.content as Json | null)?.tool_calls);
    this.config.meter?.awaitingTools(ctx.identity.trajectoryId, toolCall ? engine.id : null);
    if (toolCall) {
      this.backFromTools.delete(ctx.identity.trajectoryId); // re-inserted last: the map's order is the age order
      this.backFromTools.set(ctx.identity.trajectoryId, engine.id);
      // A trajectory that never comes back must not be remembered forever.
      if (this.backFromTools.size > 100_000) this.backFromTools.delete(this.backFromTools.keys().next().value as string);
    }
  }

  private async generate(ctx: RequestContext): Promise<Answer | null> {
    // The trajectory is back (with its tool's result, if it was waiting on one).
    if (ctx.identity !== null) {
      this.config.meter?.awaitingTools(ctx.identity.trajectoryId, null);
      const engineId = this.backFromTools.get(ctx.identity.trajectoryId);
      this.backFromTools.delete(ctx.identity.trajectoryId);
      // A failed probe takes the engine out of selection, so the turn goes to a living one at once.
      if (engineId !== undefined && this.config.livenessCheckAfterTools !== false && this.pool.get(engineId)?.alive) {
        const alive = await this.pool.probe(engineId);
        if (!alive) this.log.warn('engine failed its liveness check after a tool iteration', { engine: engineId, trajectoryId: ctx.identity.trajectoryId });
      }
    }
    const splice = new StreamSplice(ctx.api);
    const cannotResume = resumable(ctx.api, ctx.body);
    const trajectoryId = ctx.identity?.trajectoryId ?? null;
    const skipped = new Set<string>();
    const contributors: EngineView[] = [];
    let lastFailure: { engine: EngineView; failure: AttemptFailure } | null = null;
    let lastErrorAnswer: AttemptFailure | null = null;
    let noEngineSince: number | null = null;
    let backoff = this.options.backoff.initialMs;
    for (let attempt = 0; ; ) {
      if (ctx.abort.signal.aborted) return null;
      const lease = this.pool.acquire(trajectoryId, skipped);
      if (!lease) {
        // Living engines that all answered this request with an error: the error is the answer.
        if (lastErrorAnswer && this.pool.pick(trajectoryId) !== undefined) return this.fail(ctx, splice, lastErrorAnswer);
        noEngineSince ??= Date.now();
        const left = noEngineSince + this.options.noEngineDeadlineMs - Date.now();
        if (left <= 0) {
          this.stats.noEngine503 += 1;
          return this.fail(ctx, splice, null);
        }
        // A replaced machine may be back already: ask the dead ones before waiting out the backoff.
        await within(this.pool.probeDead(), left);
        if (this.pool.pick(trajectoryId, skipped) === undefined) await sleep(Math.min(backoff, left));
        backoff = Math.min(backoff * 2, this.options.backoff.maxMs);
        continue;
      }
      noEngineSince = null;
      backoff = this.options.backoff.initialMs;
      const engine = lease.engine;
      if (lastFailure) {
        this.stats.failovers += 1;
        this.reassigned(ctx, lastFailure.engine, engine, lastFailure.failure.reason);
        lastFailure = null;
      }
      attempt += 1;
      const tokensBefore = splice.tokens;
      let outcome: AttemptOutcome;
      try {
        outcome = await this.attempt(ctx, engine, splice);
      } finally {
        lease.release();
      }
      if (outcome.kind === 'relayed') return null;
      if (outcome.kind === 'done') {
        contributors.push(engine);
        this.metered(ctx, engine, outcome.answer);
        return { ...outcome.answer, engines: contributors };
      }
      // The caller went away and nobody records the answer: the failure is ours (the abort), not the engine's.
      if (ctx.abort.signal.aborted) return null;
      if (splice.tokens > tokensBefore) contributors.push(engine);
      this.log.warn('engine failed during a request', { engine: engine.id, reason: outcome.reason, trajectoryId, forwardedTokens: splice.tokens });
      if (outcome.engineDown) this.pool.markDead(engine.id, outcome.reason);
      else {
        skipped.add(engine.id);
        lastErrorAnswer = outcome;
        void this.pool.probe(engine.id);
      }
      lastFailure = { engine, failure: outcome };
      if (splice.started && cannotResume) return this.fail(ctx, splice, { ...outcome, reason: `${outcome.reason}; the stream cannot be continued (${cannotResume})` });
      if (attempt >= this.options.maxAttempts) return this.fail(ctx, splice, outcome);
      if (splice.started && splice.finished) {
        // The answer was complete; only the end of the stream was lost.
        endStream(ctx.res);
        return { ...this.streamAnswer(ctx.api, splice), engines: contributors };
      }
      const remaining = remainingTokens(ctx.body, splice.tokens);
      if (splice.started && remaining !== undefined && remaining <= 0) {
        for (const chunk of splice.syntheticFinish('length')) writeEvent(ctx.res, chunk);
        endStream(ctx.res);
        return { ...this.streamAnswer(ctx.api, splice), engines: contributors };
      }
    }
  }

  /** One engine's try at the request. */
  private async attempt(ctx: RequestContext, engine: EngineView, splice: StreamSplice): Promise<AttemptOutcome> {
    splice.beginAttempt();
    const body = ctx.stream && splice.started ? continuationBody(ctx.api, ctx.body, splice.text, splice.tokens) : ctx.body;
    let upstream: IncomingMessage;
    try {
      upstream = await send(`${engine.baseUrl}${ctx.path}`, 'POST', JSON.stringify(body), {
        agent: this.agent,
        idleTimeoutMs: this.options.upstreamIdleTimeoutMs,
        signal: ctx.abort.signal,
      });
    } catch (err) {
      return { kind: 'failed', reason: `connection failed: ${errorText(err)}`, engineDown: true };
    }
    const status = upstream.statusCode ?? 500;
    if (status >= 400) {
      let errorBody: Buffer;
      try {
        errorBody = await readAll(upstream);
      } catch (err) {
        return { kind: 'failed', reason: `connection failed: ${errorText(err)}`, engineDown: true };
      }
      if (status >= 500) return { kind: 'failed', reason: `engine answered ${status}`, engineDown: false, status, body: errorBody };
      // A 4xx is about the request, not the engine: the caller gets it, unless the stream already began
      // (then this engine cannot continue it, e.g. it lacks continue_final_message, and another may).
      if (!splice.started) {
        relay(ctx.res, status, errorBody, engine.id);
        return { kind: 'relayed' };
      }
      return { kind: 'failed', reason: `engine refused the continuation with ${status}`, engineDown: false, status, body: errorBody };
    }
    if (!ctx.stream) {
      let raw: Buffer;
      let parsed: Json;
      try {
        raw = await readAll(upstream);
      } catch (err) {
        return { kind: 'failed', reason: `connection lost before the answer was complete: ${errorText(err)}`, engineDown: true };
      }
      try {
        parsed = JSON.parse(raw.toString('utf8')) as Json;
      } catch {
        return { kind: 'failed', reason: 'the engine answered with invalid JSON', engineDown: false, status: 502, body: raw };
      }
      relay(ctx.res, status, raw, engine.id);
      return { kind: 'done', answer: { ...answerOf(ctx.api, parsed), engines: [] } };
    }
    return this.pipeStream(ctx, engine, upstream, splice);
  }

  private async pipeStream(ctx: RequestContext, engine: EngineView, upstream: IncomingMessage, splice: StreamSplice): Promise<AttemptOutcome> {
    const res = ctx.res;
    const decoder = new StringDecoder('utf8');
    let buffer = '';
    let done = false;
    const handleEvent = (raw: string): void => {
      const data = raw
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data === '') return;
      if (data === '[DONE]') {
        done = true;
        return;
      }
      const chunk = JSON.parse(data) as Json;
      if (chunk.error) throw new UpstreamError(`the engine reported an error mid-stream: ${JSON.stringify(chunk.error)}`);
      const out = splice.accept(chunk);
      if (out.length > 0 && !res.headersSent) {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', [ROLLOUT_HEADER]: engine.id });
      }
      for (const c of out) writeEvent(res, c);
    };
    try {
      for await (const piece of upstream) {
        buffer += decoder.write(piece as Buffer).replace(/\r\n/g, '\n');
        let end: number;
        while (!done && (end = buffer.indexOf('\n\n')) >= 0) {
          const raw = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          handleEvent(raw);
        }
        if (done) break;
      }
      if (!done && buffer.trim() !== '') handleEvent(buffer);
    } catch (err) {
      upstream.destroy();
      if (err instanceof UpstreamError || err instanceof SyntaxError) return { kind: 'failed', reason: err.message, engineDown: false };
      return { kind: 'failed', reason: `stream cut: ${errorText(err)}`, engineDown: true };
    }
    if (!done) return { kind: 'failed', reason: 'stream ended before [DONE]', engineDown: true };
    if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', [ROLLOUT_HEADER]: engine.id });
    endStream(res);
    return { kind: 'done', answer: { ...this.streamAnswer(ctx.api, splice), engines: [] } };
  }

  private streamAnswer(api: Api, splice: StreamSplice): Omit<Answer, 'engines'> {
    const tokens = typeof splice.usage?.completion_tokens === 'number' ? (splice.usage.completion_tokens as number) : splice.tokens;
    if (api === 'completions') return { content: splice.text, finishReason: splice.finishReason, tokens };
    const message: Json = { role: 'assistant', content: splice.text === '' && splice.toolCalls.length > 0 ? null : splice.text };
    if (splice.toolCalls.length > 0) message.tool_calls = splice.toolCalls;
    return { content: message, finishReason: splice.finishReason, tokens };
  }

  /** Answer the caller with an error: JSON before the stream began, an SSE error event after. */
  private fail(ctx: RequestContext, splice: StreamSplice, failure: AttemptFailure | null): null {
    const res = ctx.res;
    if (failure === null) {
      const message = `no living rollout engine within ${this.options.noEngineDeadlineMs} ms`;
      if (splice.started || res.headersSent) return streamError(res, 503, 'ServiceUnavailableError', message);
      res.setHeader('retry-after', '5');
      sendError(res, 503, 'ServiceUnavailableError', message);
      return null;
    }
    if (splice.started || res.headersSent) return streamError(res, failure.status ?? 502, 'UpstreamError', failure.reason);
    if (failure.status && failure.body) relay(res, failure.status, failure.body, null);
    else sendError(res, 502, 'BadGatewayError', failure.reason);
    return null;
  }

  private reassigned(ctx: RequestContext, from: EngineView, to: EngineView, reason: string): void {
    const identity = ctx.identity;
    const bus = this.config.bus;
    if (!identity || !bus || ctx.outputIndex === null) return;
    const occurredAt = (this.config.now?.() ?? new Date()).toISOString();
    const envelope = { jobId: identity.jobId, source: this.options.source, occurredAt };
    const reassignedEvent = createMessage(
      'TrajectoriesReassigned',
      {
        fromRolloutId: from.id,
        reason: reason.slice(0, 1000) || 'engine failed',
        assignments: [{ trajectoryId: identity.trajectoryId, toRolloutId: to.id, resumeFromTurn: ctx.outputIndex }],
      },
      envelope,
    );
    const statusEvent = createMessage(
      'TrajectoryStatusChanged',
      { ...pick(identity), status: 'reassigned' },
      { ...envelope, causationId: reassignedEvent.eventId, correlationId: reassignedEvent.correlationId },
    );
    // Off the request path: a slow or unreachable broker must not stall the caller's stream.
    const p = bus
      .publish([reassignedEvent, statusEvent])
      .catch((err: unknown) => this.log.error('publishing a reassignment failed', { trajectoryId: identity.trajectoryId, error: String(err) }))
      .finally(() => this.pendingEvents.delete(p));
    this.pendingEvents.add(p);
  }

  private noEngine(res: ServerResponse): void {
    this.stats.noEngine503 += 1;
    res.setHeader('retry-after', '5');
    sendError(res, 503, 'ServiceUnavailableError', 'no living rollout engine');
  }

  private async withTrajectoryLock<T>(trajectoryId: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(trajectoryId) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    this.locks.set(trajectoryId, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (this.locks.get(trajectoryId) === tail) this.locks.delete(trajectoryId);
    }
  }
}

function pick(identity: TrajectoryIdentity) {
  return {
    trajectoryId: identity.trajectoryId,
    jobId: identity.jobId,
    batchId: identity.batchId,
    step: identity.step,
    promptId: identity.promptId,
    sampleIndex: identity.sampleIndex,
  };
}

function remainingTokens(body: Json, used: number): number | undefined {
  const max = body.max_completion_tokens ?? body.max_tokens;
  return typeof max === 'number' ? max - used : undefined;
}

function answerOf(api: Api, response: Json): Omit<Answer, 'engines'> {
  const choice = ((response.choices as Json[] | undefined) ?? [])[0] ?? {};
  const usage = response.usage as Json | undefined;
  const tokens = typeof usage?.completion_tokens === 'number' ? (usage.completion_tokens as number) : 0;
  const finishReason = typeof choice.finish_reason === 'string' ? choice.finish_reason : null;
  if (api === 'completions') return { content: typeof choice.text === 'string' ? choice.text : '', finishReason, tokens };
  const message = (choice.message ?? { role: 'assistant', content: null }) as Json;
  const recorded: Json = { role: 'assistant', content: message.content ?? null };
  if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) recorded.tool_calls = message.tool_calls;
  return { content: recorded, finishReason, tokens };
}

/** Answer a retried request from the stored turn, in the shape the caller asked for. */
function replay(ctx: RequestContext, content: unknown): void {
  const res = ctx.res;
  const created = Math.floor(Date.now() / 1000);
  const id = `replay-${created}`;
  const model = ctx.body.model ?? null;
  const message = (ctx.api === 'chat' ? content : null) as Json | null;
  const toolCalls = message && Array.isArray(message.tool_calls) ? (message.tool_calls as Json[]) : [];
  // The stored turn keeps the message, not the finish reason: tool calls imply 'tool_calls', anything else 'stop'.
  const finishReason = toolCalls.length > 0 ? 'tool_calls' : 'stop';
  const headers = { [ROLLOUT_HEADER]: 'replay' };
  if (!ctx.stream) {
    const choice = ctx.api === 'chat' ? { index: 0, message, logprobs: null, finish_reason: finishReason } : { index: 0, text: content, logprobs: null, finish_reason: finishReason };
    const body = { id, object: ctx.api === 'chat' ? 'chat.completion' : 'text_completion', created, model, choices: [choice], usage: null };
    res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
  if (ctx.api === 'chat') {
    const chunk = (delta: Json, finish: string | null = null) => ({ id, object: 'chat.completion.chunk', created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] });
    writeEvent(res, chunk({ role: 'assistant', content: '' }));
    if (typeof message?.content === 'string' && message.content !== '') writeEvent(res, chunk({ content: message.content }));
    if (toolCalls.length > 0) writeEvent(res, chunk({ tool_calls: toolCalls.map((c, index) => ({ index, ...c })) }));
    writeEvent(res, chunk({}, finishReason));
  } else {
    writeEvent(res, { id, object: 'text_completion', created, model, choices: [{ index: 0, text: content, logprobs: null, finish_reason: null }] });
    writeEvent(res, { id, object: 'text_completion', created, model, choices: [{ index: 0, text: '', logprobs: null, finish_reason: finishReason }] });
  }
  endStream(res);
}

function writeEvent(res: ServerResponse, data: unknown): void {
  if (!res.destroyed && !res.writableEnded) res.write(`data: ${JSON.stringify(data)}\n\n`);
}

function endStream(res: ServerResponse): void {
  if (!res.destroyed && !res.writableEnded) res.end('data: [DONE]\n\n');
}

function streamError(res: ServerResponse, code: number, type: string, message: string): null {
  if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  writeEvent(res, { error: { message, type, param: null, code } });
  if (!res.destroyed && !res.writableEnded) res.end();
  return null;
}

/** OpenAI's error shape: `{"error": {"message", "type", "param", "code"}}`. */
function sendError(res: ServerResponse, status: number, type: string, message: string): void {
  if (res.headersSent) return void streamError(res, status, type, message);
  const body = JSON.stringify({ error: { message, type, param: null, code: status } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
}

function relay(res: ServerResponse, status: number, body: Buffer, engineId: string | null): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length, ...(engineId ? { [ROLLOUT_HEADER]: engineId } : {}) }).end(body);
}

function send(
  url: string,
  method: 'GET' | 'POST',
  payload: string | null,
  options: { agent: Agent; idleTimeoutMs: number; signal?: AbortSignal },
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const https = url.startsWith('https:');
    const headers: Record<string, string | number> = { accept: 'application/json, text/event-stream' };
    if (payload !== null) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = Buffer.byteLength(payload);
    }
    const req = (https ? httpsRequest : httpRequest)(url, {
      method,
      headers,
      ...(https ? {} : { agent: options.agent }),
      timeout: options.idleTimeoutMs,
      signal: options.signal,
    });
    // The socket timeout covers the whole exchange: an engine that stops sending mid-stream is dead to this request.
    req.on('timeout', () => req.destroy(new Error(`no bytes for ${options.idleTimeoutMs} ms`)));
    req.on('response', resolve);
    req.on('error', reject);
    req.end(payload ?? undefined);
  });
}

function readAll(stream: IncomingMessage, limit = Number.POSITIVE_INFINITY): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        stream.destroy();
        reject(new Error(`the body exceeds ${limit} bytes`));
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

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code ? `${code} ${err.message}` : err.message;
  }
  return String(err);
}

/** Wait for `p`, at most `ms`; the timer is cleared either way (a pending timer would hold the process open). */
async function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([p, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms))))]);
  } finally {
    clearTimeout(timer);
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)));
