import { randomUUID } from 'node:crypto';
import { Agent, IncomingMessage } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import { EngineView } from './engine-pool';
import { BodyTooLargeError, errorText, readAll, send, wentSilent } from './http-transport';
import { endStream, relay, sendError } from './openai-responses';
import { Answer, RequestContext, WEIGHT_VERSION_HEADER } from './request-context';
import { adapterFor } from './engines/adapters';
import { AnswerNeeds, ContinuationPlan, EngineAdapter, EngineCalls, isIdList } from './engines/engine-adapter';
import { completionChunkAsChat } from './engines/completion-as-chat';
import type { VersionSpan } from './engines/vllm-generate';
import { Api, Json, StreamSplice } from './stream-splice';
import { streamAnswer } from './stream-answer';
import { LeanRelay } from './lean-relay';
import { ROLLOUT_HEADER } from './trajectory-identity';
import { RobustrlError } from '@robustrl/bus';

/**
 * One engine's try at a request, for failover: forward it (or, once a stream began, its continuation
 * from the text already forwarded), relay what comes back to the caller, and say how it ended —
 * answered, the engine's own 4xx relayed, or failed and why (so failover knows whether the engine is
 * gone or only unfit for this request).
 */

/** Why an attempt on one engine ended without an answer. */
export interface AttemptFailure {
  kind: 'failed';
  reason: string;
  /** The engine itself is gone (connection error, cut stream, idle): mark it dead. Else (5xx, bad stream) only skip it for this request. */
  engineDown: boolean;
  /** It failed by sending nothing for the idle timeout (hung — or only queued: failover tells them apart). */
  silent?: boolean;
  /** The engine's own error answer, relayed if every engine answers so. */
  status?: number;
  body?: Buffer;
}

export type AttemptOutcome = { kind: 'done'; answer: Answer } | { kind: 'relayed' } | AttemptFailure;

/** How the router reaches engines: its keep-alive pool, the idle timeout, and the most an answer may weigh. */
export interface EngineTransport {
  agent: Agent;
  idleTimeoutMs: number;
  maxAnswerBytes: number;
}

/** An engine that reports an error in its stream is unfit for the request, not dead. */
class UpstreamError extends RobustrlError {}

/** What one attempt carries besides the request: who came before, its name, and what ends it. */
export interface AttemptSpec {
  /** Engines that generated earlier parts of the answer (a stream continued here). */
  before?: readonly EngineView[];
  /** Names the attempt on the engine (its request-id header; SGLang's `rid`). */
  requestId?: string;
  /** Called whenever the engine sends part of a streamed answer (the router's evidence of its progress). */
  onProgress?: () => void;
  /**
   * The attempt ends when any of these aborts (the caller gone, the engine out of the pool); default
   * the request's own. Handed to each call to the engine as they are, not joined into one controller.
   */
  ends?: readonly AbortSignal[];
}

export async function attemptOn(
  ctx: RequestContext,
  engine: EngineView,
  splice: StreamSplice,
  transport: EngineTransport,
  spec: AttemptSpec = {},
): Promise<AttemptOutcome> {
  const before = spec.before ?? [];
  const requestId = spec.requestId ?? `robustrl-${randomUUID()}`;
  const onProgress = spec.onProgress ?? (() => undefined);
  const ends = spec.ends ?? [ctx.abort.signal];
  const adapter = adapterFor(engine.kind);
  let plan: ContinuationPlan;
  try {
    const calls = engineCalls(engine, transport, ends);
    if (!ctx.stream) plan = adapter.unary?.(ctx.api, ctx.body) ?? { path: ctx.path, body: ctx.body, context: 'tokens', answersAs: ctx.api };
    else if (splice.started) plan = await adapter.continuation(ctx.api, ctx.body, splice.continuationPrefix(), calls);
    else plan = await adapter.generation(ctx.api, ctx.body, calls);
  } catch (err) {
    return { kind: 'failed', reason: `connection failed while preparing the request: ${errorText(err)}`, engineDown: true };
  }
  splice.beginAttempt({ id: engine.id, weightVersion: engine.weightVersion }, splice.started ? plan.context : 'prompt');
  if (plan.promptTokenIds) splice.ledger.promptTokenIds ??= plan.promptTokenIds;
  // A caller's token prompt is the prompt's ids, whatever the engine reports (tokens in, tokens out).
  if (ctx.api === 'completions' && isIdList(ctx.body.prompt)) splice.ledger.promptTokenIds ??= ctx.body.prompt as number[];
  let upstream: IncomingMessage;
  const recorded = ctx.beforeAnswer !== undefined;
  const needs: AnswerNeeds = { logprobs: recorded, tokenIds: recorded || ctx.stream };
  for (;;) {
    const body = adapter.decorate(plan.answersAs, plan.body, requestId, needs);
    try {
      upstream = await send(`${engine.baseUrl}${plan.path}`, 'POST', JSON.stringify(body), {
        agent: transport.agent,
        idleTimeoutMs: transport.idleTimeoutMs,
        signals: ends,
        headers: { [adapter.requestIdHeader]: requestId },
      });
    } catch (err) {
      return { kind: 'failed', reason: `connection failed: ${errorText(err)}`, engineDown: true, silent: wentSilent(err) };
    }
    // An engine without the plan's endpoint (vLLM's generate needs --enable-scale-out) takes the fallback.
    if (!plan.fallback || (upstream.statusCode !== 403 && upstream.statusCode !== 404)) break;
    upstream.resume();
    plan = plan.fallback;
  }
  const status = upstream.statusCode ?? 500;
  if (status >= 400) {
    let errorBody: Buffer;
    try {
      errorBody = await readAll(upstream, transport.maxAnswerBytes);
    } catch (err) {
      if (err instanceof BodyTooLargeError) return { kind: 'failed', reason: `engine answered ${status} with ${err.message}`, engineDown: false, status: 502 };
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
      raw = await readAll(upstream, transport.maxAnswerBytes);
    } catch (err) {
      // Not buffered whole: an engine answering without end is unfit for the request, the caller gets a 502 from another.
      if (err instanceof BodyTooLargeError) return { kind: 'failed', reason: `the engine's answer: ${err.message}`, engineDown: false, status: 502 };
      return {
        kind: 'failed',
        reason: `connection lost before the answer was complete: ${errorText(err)}`,
        engineDown: true,
        silent: wentSilent(err, upstream),
      };
    }
    try {
      parsed = JSON.parse(raw.toString('utf8')) as Json;
    } catch {
      return { kind: 'failed', reason: 'the engine answered with invalid JSON', engineDown: false, status: 502, body: raw };
    }
    // The engine answered as the caller asked (nothing added, nothing translated): relayed byte for byte.
    const asAsked = !plan.translate && plan.answersAs === ctx.api && adapter.answersAsAsked?.(needs) === true;
    if (plan.translate) parsed = plan.translate(parsed);
    const sampled = adapter.read(ctx.api, parsed);
    if (!asAsked) adapter.strip(parsed, ctx);
    const answered = answerOf(ctx.api, parsed);
    splice.ledger.add(sampled, answered.tokens);
    const answer: Answer = { ...answered, engines: [...before, servedBy(engine, upstream, splice.ledger.versions())], spans: splice.ledger.record() };
    if (!(await answerStored(ctx, answer))) return { kind: 'relayed' };
    relay(ctx.res, status, asAsked ? raw : Buffer.from(JSON.stringify(parsed)), engine.id);
    return { kind: 'done', answer };
  }
  return pipeStream(ctx, engine, upstream, splice, before, adapter, plan, onProgress, () => abandon(engine, adapter, requestId, transport.agent));
}

/** The engine's own endpoints a continuation may call first (llama.cpp's template and tokenizer). */
function engineCalls(engine: EngineView, transport: EngineTransport, signals: readonly AbortSignal[]): EngineCalls {
  return {
    async postJson(path, body) {
      const res = await send(`${engine.baseUrl}${path}`, 'POST', JSON.stringify(body), {
        agent: transport.agent,
        idleTimeoutMs: Math.min(transport.idleTimeoutMs, 30_000),
        signals,
      });
      const raw = await readAll(res, transport.maxAnswerBytes);
      let parsed: Json | null = null;
      try {
        const value: unknown = JSON.parse(raw.toString('utf8'));
        parsed = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : null;
      } catch {
        parsed = null;
      }
      return { status: res.statusCode ?? 500, body: parsed };
    },
  };
}

/**
 * Best effort, off the request path: the engine's abort call for a request the router gave up on
 * (SGLang's /abort_request). Closing the connection aborts on every engine too; this frees the
 * engine's slot even where the close is not seen (a proxy in between holding the connection).
 */
function abandon(engine: EngineView, adapter: EngineAdapter, requestId: string, agent: Agent): void {
  const call = adapter.abortRequest(requestId);
  if (call === null) return;
  send(`${engine.baseUrl}${call.path}`, 'POST', JSON.stringify(call.body), { agent, idleTimeoutMs: 5_000 })
    .then((res) => res.resume())
    .catch(() => undefined);
}

/**
 * The engine with the weight version it served the answer with: the oldest version that sampled a token
 * of this attempt where the engine says per token (vLLM's generate), else the version its header says,
 * else the pool's view.
 */
function servedBy(engine: EngineView, upstream: IncomingMessage, versions: VersionSpan[] | null): EngineView {
  const said = upstream.headers[WEIGHT_VERSION_HEADER];
  const header = typeof said === 'string' && /^\d+$/.test(said.trim()) ? Number(said) : null;
  const version = versions && versions.length > 0 ? Math.min(...versions.map((v) => v.version)) : header;
  return version === null || version === engine.weightVersion ? engine : { ...engine, weightVersion: version };
}

/**
 * Runs the request's beforeAnswer (recording): true when the answer may be finished. When it failed the
 * caller has been answered with the error (JSON, or an SSE error event once the stream began).
 */
export async function answerStored(ctx: RequestContext, answer: Answer): Promise<boolean> {
  if (!ctx.beforeAnswer) return true;
  try {
    await ctx.beforeAnswer(answer);
    return true;
  } catch (err) {
    sendError(ctx.res, 503, 'ServiceUnavailableError', `the answer was generated but could not be stored, ask again: ${errorText(err)}`);
    return false;
  }
}

/**
 * Forward the engine's SSE stream through the splice, which drops what the caller already has; a
 * stream nobody records first goes the lean way (lean-relay.ts), its events relayed unparsed.
 */
async function pipeStream(
  ctx: RequestContext,
  engine: EngineView,
  upstream: IncomingMessage,
  splice: StreamSplice,
  before: readonly EngineView[],
  adapter: EngineAdapter,
  plan: ContinuationPlan,
  onProgress: () => void,
  /** The router gives up on the stream: tell the engine, where closing the connection is not how it learns. */
  onAbandon: () => void,
): Promise<AttemptOutcome> {
  const res = ctx.res;
  const decoder = new StringDecoder('utf8');
  const lean = LeanRelay.of(ctx, plan, adapter, splice);
  const head = () => {
    if (!res.headersSent)
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', [ROLLOUT_HEADER]: engine.id });
  };
  let buffer = '';
  let done = false;
  /** What the events of the piece being read come to: written in one go once the piece is read. */
  let out = '';
  const handleEvent = (raw: string): void => {
    // An engine's event is one `data: {...}` line; anything else (several data lines, comments, ids) the general way.
    const data =
      raw.startsWith('data: ') && raw.indexOf('\n') < 0
        ? raw.slice(6)
        : raw
            .split('\n')
            .filter((line) => line.startsWith('data:'))
            .map((line) => line.slice(5).replace(/^ /, ''))
            .join('\n');
    if (data === '') return;
    if (data === '[DONE]') {
      done = true;
      return;
    }
    if (lean?.active) {
      const forward = lean.accept(data);
      if (forward !== null) {
        head();
        out += `data: ${forward}\n\n`;
        return;
      }
    }
    const native = JSON.parse(data) as Json;
    if (native.error) throw new UpstreamError(`the engine reported an error mid-stream: ${JSON.stringify(native.error)}`);
    const chunk = plan.translate ? plan.translate(native) : native;
    const sampled = adapter.read(plan.answersAs, chunk);
    adapter.strip(chunk, ctx);
    const forwarded = splice.accept(plan.answersAs === ctx.api ? chunk : completionChunkAsChat(chunk), sampled);
    if (forwarded.length > 0) head();
    for (const c of forwarded) out += `data: ${JSON.stringify(c)}\n\n`;
  };
  const flush = (): void => {
    if (out !== '' && !res.destroyed && !res.writableEnded) res.write(out);
    out = '';
  };
  /** Ended without an answer: the splice must know what the caller has, for a continuation. */
  const failed = (failure: AttemptFailure): AttemptFailure => {
    lean?.settle();
    return failure;
  };
  let drainDeadline: NodeJS.Timeout | undefined;
  try {
    for await (const piece of upstream) {
      // After [DONE] the rest is read to its end, not cut: a response aborted mid-way destroys its
      // keep-alive socket, and every stream would then pay a new connection (docs/router.md "The lean path").
      if (done) continue;
      onProgress();
      const text = decoder.write(piece as Buffer);
      buffer += text.includes('\r') ? text.replace(/\r\n/g, '\n') : text;
      // One write for all the events of a piece: one chunk on the socket, not one per token.
      try {
        let end: number;
        while (!done && (end = buffer.indexOf('\n\n')) >= 0) {
          const raw = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          handleEvent(raw);
        }
      } finally {
        // The piece that holds [DONE] goes out with the end of the stream, in one write (finishStream):
        // one write fewer a request, and its last events leave once the answer is stored.
        if (!done) flush();
      }
      // An engine that says [DONE] and keeps the response open gets a moment to end it, then loses the connection.
      if (done) drainDeadline = setTimeout(() => upstream.destroy(), DRAIN_AFTER_DONE_MS);
    }
    if (!done && buffer.trim() !== '') {
      handleEvent(buffer);
      if (!done) flush();
    }
  } catch (err) {
    clearTimeout(drainDeadline);
    // Cut while reading what followed [DONE]: the answer was whole, only the connection is lost.
    if (done) return finishStream(ctx, engine, upstream, splice, before, lean, out);
    upstream.destroy();
    onAbandon();
    if (err instanceof UpstreamError || err instanceof SyntaxError) return failed({ kind: 'failed', reason: err.message, engineDown: false });
    if (wentSilent(err, upstream))
      return failed({ kind: 'failed', reason: 'stream cut: the engine sent nothing for the idle timeout', engineDown: true, silent: true });
    return failed({ kind: 'failed', reason: `stream cut: ${errorText(err)}`, engineDown: true });
  }
  clearTimeout(drainDeadline);
  if (!done) return failed({ kind: 'failed', reason: 'stream ended before [DONE]', engineDown: true });
  return finishStream(ctx, engine, upstream, splice, before, lean, out);
}

/** How long an engine may keep a response open after its [DONE] before the router closes the connection. */
const DRAIN_AFTER_DONE_MS = 1_000;

/** The stream reached [DONE]: record the answer, then end the caller's stream. */
async function finishStream(
  ctx: RequestContext,
  engine: EngineView,
  upstream: IncomingMessage,
  splice: StreamSplice,
  before: readonly EngineView[],
  /** The lean relay, when the stream went (part of) the lean way. */
  lean: LeanRelay | null,
  /** The events of the piece that held [DONE], not yet written: they end the stream with it. */
  last = '',
): Promise<AttemptOutcome> {
  const res = ctx.res;
  if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', [ROLLOUT_HEADER]: engine.id });
  // A stream that ended on the lean path has no weight versions to say (only generate's answers do: never lean).
  const engines = () => [...before, servedBy(engine, upstream, splice.ledger.versions())];
  const answer: Answer = lean?.active ? lean.answer(engines()) : { ...streamAnswer(ctx.api, splice), engines: engines() };
  if (!(await answerStored(ctx, answer))) return { kind: 'relayed' };
  endStream(res, last);
  return { kind: 'done', answer };
}

function answerOf(api: Api, response: Json): Omit<Answer, 'engines' | 'spans'> {
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
