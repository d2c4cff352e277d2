import type { SpanContext, TokenSpan } from '@robustrl/contracts';
import type { ChunkTokens } from './engine-adapter';
import type { VersionSpan } from './wire-types';

/** The engine a span was sampled on, as the router saw it when the attempt began. */
export interface SpanEngine {
  id: string;
  weightVersion: number;
}

interface OpenSpan {
  engine: SpanEngine;
  context: SpanContext;
  ids: number[];
  logprobs: Array<number | null>;
  /** The engine's own count of tokens sampled in this attempt (null: it never said). */
  sampled: number | null;
  /** Tokens forwarded in this attempt, counted the router's way (a delta without ids counts one). */
  forwarded: number;
  prefillTokens: number | undefined;
  /** Ids of tool-call deltas held back until the call is complete: a dead engine's half call is generated again, so its ids are dropped with it. */
  held: { ids: number[]; logprobs: Array<number | null>; forwarded: number };
  /** Held ids dropped with their engine (sampled, not part of the answer). */
  dropped: number;
  /** Which weight version sampled which of the attempt's output tokens, when the engine said. */
  versions: VersionSpan[] | null;
}

/**
 * What each engine sampled for one answer, span by span (pure; token-level preservation, docs/router.md). The
 * splice feeds it what each forwarded chunk carried; failover opens a span per attempt. What it yields
 * is exactly the tokens the caller received, attributed to the engine and weight version that sampled
 * them: a span's ids are complete when the engine's own count agrees with them, and the continuation
 * prefix is offered as ids only when every span is complete.
 */
export class TokenLedger {
  private readonly spans: OpenSpan[] = [];
  /** The prompt's ids as the first engine reported them (vLLM's return_token_ids), for a token-prompt continuation. */
  promptTokenIds: number[] | null = null;

  /** A new attempt on `engine`, whose context reached it as `context`. */
  begin(engine: SpanEngine, context: SpanContext): void {
    const last = this.spans.at(-1);
    // An attempt that forwarded nothing leaves no span: it sampled nothing the answer holds.
    if (last && last.forwarded === 0 && last.ids.length === 0) this.spans.pop();
    else if (last) {
      last.dropped += last.held.ids.length;
      last.held = { ids: [], logprobs: [], forwarded: 0 };
    }
    this.spans.push({
      engine,
      context,
      ids: [],
      logprobs: [],
      sampled: null,
      forwarded: 0,
      prefillTokens: undefined,
      held: { ids: [], logprobs: [], forwarded: 0 },
      dropped: 0,
      versions: null,
    });
  }

  /** What one forwarded chunk carried; `heldBack`: its tokens belong to a tool call not yet complete. `forwarded`: the router's own count for it. */
  add(tokens: ChunkTokens, forwarded: number, heldBack = false): void {
    const span = this.current();
    if (tokens.promptTokenIds && this.promptTokenIds === null) this.promptTokenIds = tokens.promptTokenIds;
    if (tokens.sampledSoFar !== null) span.sampled = Math.max(span.sampled ?? 0, tokens.sampledSoFar);
    if (tokens.versions) span.versions = tokens.versions;
    const into = heldBack ? span.held : span;
    into.ids.push(...tokens.ids);
    into.logprobs.push(...(tokens.logprobs.length === tokens.ids.length ? tokens.logprobs : tokens.ids.map(() => null)));
    into.forwarded += Math.max(forwarded, tokens.ids.length);
  }

  /** The held-back tool call was forwarded whole: its tokens are part of the answer now. */
  releaseHeld(): void {
    const span = this.current();
    span.ids.push(...span.held.ids);
    span.logprobs.push(...span.held.logprobs);
    span.forwarded += span.held.forwarded;
    span.held = { ids: [], logprobs: [], forwarded: 0 };
  }

  /** The prompt the attempt's engine prefilled (its usage), recorded for a text continuation's cost. */
  prefilled(promptTokens: number): void {
    this.current().prefillTokens = promptTokens;
  }

  /** Every id of the answer so far, in order; null when a span's ids are incomplete (or none were reported). */
  get tokenIds(): number[] | null {
    const out: number[] = [];
    for (const s of this.spans) {
      if (!complete(s)) return null;
      out.push(...s.ids);
    }
    return out;
  }

  /**
   * The spans to record: one per attempt that contributed, in order. A span of an engine that reported no
   * ids has none, and still says which engine and weight version sampled it and how its context came
   * (a text continuation's re-prefill is its cost). The first carries the prompt's ids when known.
   */
  record(): TokenSpan[] {
    const out: TokenSpan[] = [];
    for (const s of this.spans) {
      if (s.forwarded === 0 && s.ids.length === 0) continue;
      for (const piece of byVersion(s)) {
        out.push({
          rolloutId: s.engine.id,
          weightVersion: piece.version,
          tokenIds: s.ids.slice(piece.start, piece.end),
          logprobs: s.logprobs.slice(piece.start, piece.end),
          sampled: piece.whole ? s.sampled : piece.end - piece.start,
          // A later version's part went on from the exact tokens sampled before it (the engine
          // prefilled them again under the new weights when it swapped them: vllm_extension.py).
          context: piece.start === 0 ? s.context : 'tokens',
          ...(piece.start === 0 && s.context === 'text' && s.prefillTokens !== undefined ? { prefillTokens: s.prefillTokens } : {}),
          // The turn's prompt as ids, on its first span: a trainer needs it with the sampled ids.
          ...(out.length === 0 && this.promptTokenIds ? { promptTokenIds: [...this.promptTokenIds] } : {}),
        });
      }
    }
    return out;
  }

  /** Which weight versions sampled the current attempt's tokens, when its engine said (null: it did not). */
  versions(): VersionSpan[] | null {
    return this.spans.at(-1)?.versions ?? null;
  }

  private current(): OpenSpan {
    const span = this.spans.at(-1);
    if (!span) throw new Error('TokenLedger: add before begin');
    return span;
  }
}

/**
 * A span cut where the weight version that sampled it changed (the engine's spans, when it gave them
 * for exactly the span's ids); else the whole span, tagged with the version the router saw.
 */
function byVersion(s: OpenSpan): Array<{ version: number; start: number; end: number; whole: boolean }> {
  const whole = [{ version: s.engine.weightVersion, start: 0, end: s.ids.length, whole: true }];
  const v = s.versions;
  if (!v || v.length === 0 || !complete(s)) return whole;
  const covers = v[0]!.start === 0 && v.at(-1)!.end === s.ids.length && v.every((p, i) => p.end > p.start && (i === 0 || p.start === v[i - 1]!.end));
  if (!covers) return whole;
  if (v.length === 1) return [{ version: v[0]!.version, start: 0, end: s.ids.length, whole: true }];
  return v.map((p) => ({ ...p, whole: false }));
}

/**
 * A span's ids are complete when there is one per token: the engine's count agrees when it gives one
 * (llama.cpp's stream omits ids at multi-byte characters; its count does not), else one per forwarded
 * token. Held-back ids (a tool call in the making, or dropped with its engine) are accounted for, not
 * part of the answer: a continuation regenerates that call.
 */
function complete(s: OpenSpan): boolean {
  if (s.ids.length === 0 && s.forwarded > 0) return false;
  if (s.sampled !== null) return s.ids.length + s.held.ids.length + s.dropped >= s.sampled;
  return s.ids.length >= s.forwarded;
}
