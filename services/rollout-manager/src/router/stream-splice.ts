import { isIdList, type Api, type Json } from './engines/wire-types';
import type { SpanContext } from '@robustrl/contracts';
import type { ChunkTokens, ContinuationPrefix } from './engines/engine-adapter';
import { SpanEngine, TokenLedger } from './engines/token-ledger';

/**
 * Splices the SSE streams of successive engines into the one stream the caller sees (pure, no I/O).
 *
 * The caller must not notice a failover: the continuation's chunks get the first stream's id,
 * created and model; the continuation's opening role chunk is dropped (the role was sent); usage
 * counts the tokens generated before the failure. Tool-call deltas are held back until their choice
 * finishes: a half tool call from a dead engine is worthless to the caller, and held back it is simply
 * generated again by the next engine from the text prefix, which the caller has already received.
 */
export type { Api, Json } from './engines/wire-types';

interface ToolCallAccumulator {
  index: number;
  id?: string;
  type?: string;
  function: { name?: string; arguments: string };
}

export class StreamSplice {
  /** Text of choice 0 forwarded to the caller so far. */
  text = '';
  /** Tokens of choice 0 forwarded so far (the ids the engine reported, else log-prob entries, else one per non-empty delta). */
  tokens = 0;
  finishReason: string | null = null;
  /** Tool calls of choice 0 as finally forwarded. */
  toolCalls: Array<{ id?: string; type: string; function: { name: string; arguments: string } }> = [];
  usage: Json | null = null;
  /** What each engine sampled, span by span, of what was forwarded. */
  readonly ledger = new TokenLedger();
  private meta: { id: unknown; created: unknown; model: unknown } | null = null;
  private roleSent = false;
  private tokensBeforeAttempt = 0;
  /** The chunk just accepted forwarded the held-back tool calls: their tokens join the answer. */
  private toolCallsReleased = false;
  private pendingToolCalls = new Map<number, ToolCallAccumulator>();

  constructor(readonly api: Api) {}

  /** What a continuation starts from: the text forwarded, and the token ids when every one is known. */
  continuationPrefix(): ContinuationPrefix {
    return { text: this.text, tokenIds: this.ledger.tokenIds, promptTokenIds: this.ledger.promptTokenIds, tokens: this.tokens };
  }

  /** Anything reached the caller: a failover from now on must continue, not restart. */
  get started(): boolean {
    return this.meta !== null;
  }

  get finished(): boolean {
    return this.finishReason !== null;
  }

  /** A new engine takes over: its tool-call deltas start from scratch; its tokens are a new span. */
  beginAttempt(engine: SpanEngine, context: SpanContext): void {
    this.tokensBeforeAttempt = this.tokens;
    this.pendingToolCalls.clear();
    this.ledger.begin(engine, context);
  }

  /**
   * One upstream chunk in, the chunks to forward out (zero, one or two). `sampled`: the token ids and
   * counts the engine reported in it (its adapter's reading), for the ledger.
   */
  accept(chunk: Json, sampled: ChunkTokens): Json[] {
    const tokensBefore = this.tokens;
    const primary = ((chunk.choices as Json[] | undefined) ?? []).find((c) => (c.index ?? 0) === 0);
    // Tokens of a tool call are held back with it (a dead engine's half call is generated again).
    const heldBack = this.api === 'chat' && (Array.isArray((primary?.delta as Json | undefined)?.tool_calls) || this.pendingToolCalls.size > 0);
    const out = this.acceptChunk(chunk, sampled.ids.length);
    this.ledger.add(sampled, this.tokens - tokensBefore, heldBack);
    if (this.toolCallsReleased) this.ledger.releaseHeld();
    if (sampled.sampledSoFar !== null) this.tokens = Math.max(this.tokens, this.tokensBeforeAttempt + sampled.sampledSoFar);
    this.toolCallsReleased = false;
    const usage = chunk.usage as Json | undefined;
    if (usage && typeof usage.prompt_tokens === 'number') this.ledger.prefilled(usage.prompt_tokens + this.tokensBeforeAttempt);
    return out;
  }

  /** `sampledIds`: the ids the engine reported in the chunk, its token count where it reports any. */
  private acceptChunk(chunk: Json, sampledIds: number): Json[] {
    if (this.meta === null) this.meta = { id: chunk.id, created: chunk.created, model: chunk.model };
    else Object.assign(chunk, this.meta);
    const out: Json[] = [];
    const choices = Array.isArray(chunk.choices) ? (chunk.choices as Json[]) : [];
    let meaningful = false;
    for (const choice of choices) {
      const primary = (choice.index ?? 0) === 0;
      if (this.api === 'chat') {
        const delta = (choice.delta ?? {}) as Json;
        if (delta.role !== undefined) {
          if (this.roleSent && primary) delete delta.role;
          else this.roleSent = this.roleSent || primary;
        }
        if (primary && typeof delta.content === 'string' && delta.content !== '') {
          this.text += delta.content;
          this.tokens += tokenCount(choice, sampledIds);
        }
        if (primary && Array.isArray(delta.tool_calls)) {
          this.holdToolCalls(delta.tool_calls as Json[]);
          delete delta.tool_calls;
        }
        if (primary && choice.finish_reason && this.pendingToolCalls.size > 0) out.push(this.toolCallChunk(chunk));
        meaningful ||= hasPayload(delta);
      } else if (primary && typeof choice.text === 'string' && choice.text !== '') {
        this.text += choice.text;
        this.tokens += tokenCount(choice, sampledIds);
        meaningful = true;
      } else if (typeof choice.text === 'string' && choice.text !== '') {
        meaningful = true;
      }
      if (primary && choice.finish_reason) this.finishReason = String(choice.finish_reason);
      meaningful ||= Boolean(choice.finish_reason) || (choice.logprobs !== null && choice.logprobs !== undefined);
    }
    if (chunk.usage && typeof chunk.usage === 'object') {
      const usage = { ...(chunk.usage as Json) };
      // The continuation's prompt held the tokens generated before the failover; they are completion tokens.
      if (typeof usage.completion_tokens === 'number') usage.completion_tokens += this.tokensBeforeAttempt;
      if (typeof usage.prompt_tokens === 'number') usage.prompt_tokens = Math.max(0, usage.prompt_tokens - this.tokensBeforeAttempt);
      chunk.usage = usage;
      this.usage = usage;
      meaningful = true;
    }
    if (meaningful) out.push(chunk);
    return out;
  }

  /** The engine died after the last allowed token but before saying so: end the choice as it would have. */
  syntheticFinish(reason: string): Json[] {
    const out: Json[] = [];
    const base = { id: this.meta?.id, created: this.meta?.created, model: this.meta?.model };
    if (this.api === 'chat') {
      if (this.pendingToolCalls.size > 0) out.push(this.toolCallChunk({ ...base, object: 'chat.completion.chunk' }));
      out.push({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: reason }] });
    } else {
      out.push({ ...base, object: 'text_completion', choices: [{ index: 0, text: '', logprobs: null, finish_reason: reason }] });
    }
    this.finishReason = reason;
    return out;
  }

  private holdToolCalls(deltas: Json[]): void {
    for (const d of deltas) {
      const index = typeof d.index === 'number' ? d.index : 0;
      const acc = this.pendingToolCalls.get(index) ?? { index, function: { arguments: '' } };
      if (typeof d.id === 'string') acc.id = d.id;
      if (typeof d.type === 'string') acc.type = d.type;
      const fn = (d.function ?? {}) as Json;
      if (typeof fn.name === 'string' && fn.name !== '') acc.function.name = fn.name;
      if (typeof fn.arguments === 'string') acc.function.arguments += fn.arguments;
      this.pendingToolCalls.set(index, acc);
    }
  }

  private toolCallChunk(template: Json): Json {
    const calls = [...this.pendingToolCalls.values()].sort((a, b) => a.index - b.index);
    this.pendingToolCalls.clear();
    this.toolCallsReleased = true;
    this.toolCalls = calls.map((c) => ({
      ...(c.id ? { id: c.id } : {}),
      type: c.type ?? 'function',
      function: { name: c.function.name ?? '', arguments: c.function.arguments },
    }));
    return {
      id: template.id,
      object: template.object ?? 'chat.completion.chunk',
      created: template.created,
      model: template.model,
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: calls.map((c) => ({
              index: c.index,
              id: c.id,
              type: c.type ?? 'function',
              function: { name: c.function.name ?? '', arguments: c.function.arguments },
            })),
          },
          logprobs: null,
          finish_reason: null,
        },
      ],
    };
  }
}

/** Tokens in a choice's delta: the ids the engine reported, else its log-prob entries, else one. */
function tokenCount(choice: Json, sampledIds: number): number {
  if (sampledIds > 0) return sampledIds;
  const logprobs = choice.logprobs as Json | null | undefined;
  if (logprobs && Array.isArray(logprobs.content)) return logprobs.content.length;
  if (logprobs && Array.isArray(logprobs.tokens)) return logprobs.tokens.length;
  return 1;
}

function hasPayload(delta: Json): boolean {
  if (delta.role !== undefined) return true;
  for (const [key, value] of Object.entries(delta)) {
    if (key === 'role') continue;
    if (typeof value === 'string' ? value !== '' : value !== null && value !== undefined) return true;
  }
  return false;
}

/** Whether a stream of this request can be continued on another engine after output was forwarded. */
export function resumable(api: Api, body: Json): string | null {
  if (typeof body.n === 'number' && body.n > 1) return 'n > 1';
  if (api === 'completions') {
    if (typeof body.prompt !== 'string' && !isIdList(body.prompt)) return 'the prompt is neither a single string nor a list of token ids';
    if (body.echo === true) return 'echo';
    if (typeof body.best_of === 'number' && body.best_of > 1) return 'best_of > 1';
  }
  return null;
}
