import { randomUUID } from 'node:crypto';
import { Agent } from 'node:http';
import { EnginePool, EngineView } from './engine-pool';
import { answerStored, AttemptFailure, AttemptOutcome, attemptOn } from './engine-attempt';
import { endStream, relay, sendError, streamError, writeEvent } from './openai-responses';
import { ReassignmentEvents } from './reassignment-events';
import { RequestEvidence } from './request-evidence';
import { Answer, RequestContext } from './request-context';
import { RouterLogger, RouterStats } from './router-reporting';
import { Json, resumable, StreamSplice } from './stream-splice';
import { streamAnswer } from './stream-answer';
import { DEFAULT_ENGINE_ANSWER_BYTES } from './http-transport';
import { ThroughputMeter } from './throughput-meter';
import { ToolIterationLiveness } from './tool-liveness';

export interface FailoverOptions {
  pool: EnginePool;
  agent: Agent;
  stats: RouterStats;
  log: RouterLogger;
  events: ReassignmentEvents;
  liveness: ToolIterationLiveness;
  meter?: ThroughputMeter;
  /**
   * What each engine's real requests show (stalls, failures), for the detector. Without one, failover
   * keeps its own: it reads when each engine last sent (`queuedOnBusyEngine`).
   */
  evidence?: RequestEvidence;
  noEngineDeadlineMs: number;
  upstreamIdleTimeoutMs: number;
  /** The most an engine's whole (non-streamed) answer may weigh. */
  maxAnswerBytes?: number;
  maxAttempts: number;
  backoff: { initialMs: number; maxMs: number };
}

/**
 * Failover (paper §5.2.2: a rollout that dies mid-trajectory loses nothing): serve a request on living
 * engines until it is answered. The pool picks the engine (the trajectory's own while it lives); a
 * connection error, a stream that ends before [DONE] or an idle upstream takes the engine out (unless
 * it was only busy: `queuedOnBusyEngine`), a 5xx skips it for the request, and the request goes on on
 * another — resent if nothing reached the caller yet, else continued from the forwarded text
 * (stream-splice.ts), so the caller sees one uninterrupted answer.
 */
export class Failover {
  /** The engines' requests as seen here; when each last sent tells a busy engine's queue from a hang. */
  private readonly evidence: RequestEvidence;

  constructor(private readonly o: FailoverOptions) {
    this.evidence = o.evidence ?? new RequestEvidence(Date.now());
  }

  /** Returns the answer, or null when the caller got an error (or an engine's own 4xx) instead. */
  async generate(ctx: RequestContext): Promise<Answer | null> {
    const { pool, stats, log } = this.o;
    // The trajectory is back (with its tool's result, if it was waiting on one).
    if (ctx.identity !== null) {
      this.o.meter?.awaitingTools(ctx.identity.trajectoryId, null);
      await this.o.liveness.returned(ctx.identity.trajectoryId);
    }
    const splice = new StreamSplice(ctx.api);
    const cannotResume = resumable(ctx.api, ctx.body);
    const trajectoryId = ctx.identity?.trajectoryId ?? null;
    const skipped = new Set<string>();
    const contributors: EngineView[] = [];
    let lastFailure: { engine: EngineView; failure: AttemptFailure } | null = null;
    let lastErrorAnswer: AttemptFailure | null = null;
    let noEngineSince: number | null = null;
    let backoff = this.o.backoff.initialMs;
    for (let attempt = 0; ;) {
      if (ctx.abort.signal.aborted) return null;
      const lease = pool.acquire(trajectoryId, skipped);
      if (!lease) {
        // Living engines that all answered this request with an error: the error is the answer.
        if (lastErrorAnswer && pool.pick(trajectoryId) !== undefined) return this.fail(ctx, splice, lastErrorAnswer);
        noEngineSince ??= Date.now();
        const left = noEngineSince + this.o.noEngineDeadlineMs - Date.now();
        if (left <= 0) {
          stats.noEngine503 += 1;
          return this.fail(ctx, splice, null);
        }
        // A replaced machine may be back already: ask the dead ones before waiting out the backoff.
        await within(pool.probeDead(), left);
        if (pool.pick(trajectoryId, skipped) === undefined) await sleep(Math.min(backoff, left));
        backoff = Math.min(backoff * 2, this.o.backoff.maxMs);
        continue;
      }
      noEngineSince = null;
      backoff = this.o.backoff.initialMs;
      const engine = lease.engine;
      if (lastFailure) {
        stats.failovers += 1;
        if (ctx.identity && ctx.outputIndex !== null) {
          this.o.events.reassigned(ctx.identity, ctx.outputIndex, lastFailure.engine, engine, lastFailure.failure.reason);
        }
        lastFailure = null;
      }
      attempt += 1;
      const tokensBefore = splice.tokens;
      let outcome: AttemptOutcome;
      const evidence = this.evidence;
      if (ctx.stream) evidence.opened(engine.id, Date.now());
      try {
        outcome = await attemptOn(
          ctx,
          engine,
          splice,
          { agent: this.o.agent, idleTimeoutMs: this.o.upstreamIdleTimeoutMs, maxAnswerBytes: this.o.maxAnswerBytes ?? DEFAULT_ENGINE_ANSWER_BYTES },
          {
            before: contributors,
            requestId: requestIdOf(ctx, attempt),
            onProgress: () => evidence.progressed(engine.id, Date.now()),
            // The attempt ends when the caller goes away or the engine leaves the pool (EngineLease.left).
            ends: [ctx.abort.signal, lease.left],
          },
        );
      } finally {
        lease.release();
        if (ctx.stream) evidence.closed(engine.id);
      }
      const busy = outcome.kind === 'failed' && queuedOnBusyEngine(outcome, evidence.lastTokenAt(engine.id), Date.now(), this.o.upstreamIdleTimeoutMs);
      if (outcome.kind !== 'failed') evidence.ended(engine.id, { ok: true });
      // A 4xx (a refused continuation) is about the request, a wait in a busy engine's queue about its
      // load; everything else is the engine's failure — unless it left the pool (or moved) mid-request.
      else if (!ctx.abort.signal.aborted && !lease.left.aborted && !busy && (outcome.engineDown || (outcome.status ?? 500) >= 500)) {
        evidence.ended(engine.id, { ok: false, reason: outcome.reason });
      }
      if (outcome.kind === 'relayed') return null;
      if (outcome.kind === 'done') {
        this.metered(ctx, engine, outcome.answer);
        return outcome.answer;
      }
      // The caller went away and nobody records the answer: the failure is ours (the abort), not the engine's.
      if (ctx.abort.signal.aborted) return null;
      if (splice.tokens > tokensBefore) contributors.push(engine);
      log.warn('engine failed during a request', { engine: engine.id, reason: outcome.reason, trajectoryId, forwardedTokens: splice.tokens });
      if (lease.left.aborted) {
        // Left the pool or moved: the next attempt picks again (the engine at its new address, or another).
      } else if (outcome.engineDown && !busy) pool.markDead(engine.id, outcome.reason);
      else {
        skipped.add(engine.id);
        lastErrorAnswer = outcome;
        if (!busy) void pool.probe(engine.id);
      }
      lastFailure = { engine, failure: outcome };
      if (splice.started && cannotResume)
        return this.fail(ctx, splice, { ...outcome, reason: `${outcome.reason}; the stream cannot be continued (${cannotResume})` });
      if (attempt >= this.o.maxAttempts) return this.fail(ctx, splice, outcome);
      if (splice.started && splice.finished) {
        // The answer was complete; only the end of the stream was lost.
        const answer = { ...streamAnswer(ctx.api, splice), engines: contributors };
        if (!(await answerStored(ctx, answer))) return null;
        endStream(ctx.res);
        return answer;
      }
      const remaining = remainingTokens(ctx.body, splice.tokens);
      if (splice.started && remaining !== undefined && remaining <= 0) {
        for (const chunk of splice.syntheticFinish('length')) writeEvent(ctx.res, chunk);
        const answer = { ...streamAnswer(ctx.api, splice), engines: contributors };
        if (!(await answerStored(ctx, answer))) return null;
        endStream(ctx.res);
        return answer;
      }
    }
  }

  /** Throughput per engine for the detector; a trajectory answered with a tool call now waits on its tool (and is checked on return). */
  private metered(ctx: RequestContext, engine: EngineView, answer: Answer): void {
    this.o.meter?.answered(engine.id, answer.tokens);
    if (ctx.identity === null) return;
    const toolCall = ctx.api === 'chat' && (answer.toolCalls ?? Array.isArray((answer.content as Json | null)?.tool_calls));
    this.o.meter?.awaitingTools(ctx.identity.trajectoryId, toolCall ? engine.id : null);
    if (toolCall) this.o.liveness.awaitingTool(ctx.identity.trajectoryId, engine.id);
  }

  /** Answer the caller with an error: JSON before the stream began, an SSE error event after. */
  private fail(ctx: RequestContext, splice: StreamSplice, failure: AttemptFailure | null): null {
    const res = ctx.res;
    if (failure === null) {
      const message = `no living rollout engine within ${this.o.noEngineDeadlineMs} ms`;
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
}

/**
 * A request that got nothing for the idle timeout from an engine that meanwhile kept sending for its
 * other streams waited in that engine's queue (or on a long prefill): the engine is busy, not hung. The
 * request goes to another engine; the busy one stays in the pool and its failure is not held against it.
 * (A hung engine's streams all fall silent: the first to time out finds no recent bytes.)
 */
export function queuedOnBusyEngine(failure: AttemptFailure, engineLastBytesAt: number | undefined, now: number, idleTimeoutMs: number): boolean {
  return failure.silent === true && engineLastBytesAt !== undefined && now - engineLastBytesAt < idleTimeoutMs;
}

/**
 * The attempt's request id on the engine: a recorded request's names its trajectory, turn and attempt,
 * so an engine's logs (and an abort) point back to the trajectory; an unrecorded one's is random.
 */
function requestIdOf(ctx: RequestContext, attempt: number): string {
  if (ctx.identity === null || ctx.outputIndex === null) return `robustrl-${randomUUID()}`;
  // The suffix keeps a retried request's attempts apart from the first one's (SGLang refuses a rid in use).
  return `${ctx.identity.trajectoryId}/${ctx.outputIndex}/${attempt}-${randomUUID().slice(0, 8)}`;
}

/** What the caller's token budget leaves after what was already forwarded (undefined: no budget). */
function remainingTokens(body: Json, used: number): number | undefined {
  const max = body.max_completion_tokens ?? body.max_tokens;
  return typeof max === 'number' ? max - used : undefined;
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
