import type { Api, Json, VersionSpan } from './wire-types';
import type { LeanEvent } from './lean-event';

/**
 * The port between the router and one kind of inference engine. The router speaks the
 * OpenAI API to callers; engines differ exactly where fault tolerance is hard — how they report the
 * token ids they sampled, how a request is continued on them after another engine died, how to tell a
 * wedged engine from a healthy one, how to abort a request. Each adapter answers those questions for
 * one engine from its own documentation and source; `engine-adapters.contract.spec.ts` holds every
 * adapter to the shapes its engine sends and accepts.
 *
 * Contract:
 *  - `decorate` only adds what the router needs (token ids, log-probs, the engine's own counters); the
 *    caller's fields are left as they are. `strip` removes from an answer what `decorate` made the
 *    engine add, so the caller receives what it asked for.
 *  - `read` is pure: the token ids and log-probs one chunk (or a whole non-streamed answer) carries for
 *    choice 0, and the engine's own running count of sampled tokens when it reports one — which is how
 *    an id the stream left out is noticed instead of silently lost.
 *  - `generation` says how a streamed request is first sent: as the caller sent it, or (where the
 *    engine's endpoint for the caller's API would lose ids) the same generation through an endpoint that
 *    keeps them, answered in the caller's shape.
 *  - `continuation` never loses or repeats a token: the body asks the engine for the rest of the answer
 *    after `prefix`, with the budget reduced by what was generated. It continues from the exact token
 *    ids (`context: 'tokens'`) when the engine accepts a token prompt and every id is known, and from the
 *    text otherwise (`context: 'text'`: the engine re-tokenises and prefills the prefix again).
 *  - `abortRequest` names the engine's abort endpoint, or null where closing the connection aborts.
 */
export type EngineKind = 'vllm' | 'sglang' | 'llama.cpp';
export const ENGINE_KINDS: readonly EngineKind[] = ['vllm', 'sglang', 'llama.cpp'];

/** What one chunk (or a non-streamed answer) says about the tokens of choice 0. */
export interface ChunkTokens {
  /** Ids sampled in this chunk, in order, each with its log-prob (null where the engine gave none). */
  ids: number[];
  logprobs: Array<number | null>;
  /** The engine's running count of tokens sampled for the request so far, when it reports one. */
  sampledSoFar: number | null;
  /** The prompt's token ids as the engine tokenised it, when it reports them (vLLM's return_token_ids). */
  promptTokenIds: number[] | null;
  /**
   * Which weight version sampled which of the attempt's output tokens, when the engine says (vLLM's
   * generate endpoint, on its last chunk): the turn is tagged with these rather than the pool's view.
   */
  versions?: VersionSpan[] | null;
}

/** What was generated before a continuation, by whichever engines. */
export interface ContinuationPrefix {
  /** The text the caller has received of choice 0. */
  text: string;
  /** Every token id sampled so far, in order; null when an engine's stream left some out. */
  tokenIds: number[] | null;
  /** The prompt's ids as the first engine reported them (null: it did not). */
  promptTokenIds: number[] | null;
  /** Tokens generated so far (the budget already spent). */
  tokens: number;
}

export interface ContinuationPlan {
  path: string;
  body: Json;
  /** Turns the engine's own answer shape (a chunk, or a whole answer) into `answersAs`'s, when they differ. */
  translate?: (chunk: Json) => Json;
  /** What to send instead when this engine does not serve the plan's path (answers 403 or 404). */
  fallback?: ContinuationPlan;
  context: 'tokens' | 'text';
  /** The API the engine answers in: `completions` when a chat request is continued from a token prompt. */
  answersAs: Api;
  /** The prompt's ids, when the plan tokenised it: a later continuation starts from them. */
  promptTokenIds?: number[];
}

/** The few engine calls a continuation may need (rendering the chat template, tokenising). */
export interface EngineCalls {
  postJson(path: string, body: Json): Promise<{ status: number; body: Json | null }>;
}

/**
 * What the router itself needs of an answer, beyond what the caller asked. Log-probs are for the record
 * (a turn keeps what was sampled, with its log-probs); an answer nobody records needs only token ids,
 * and a chunk without log-probs is several times smaller to parse (docs/router.md "The lean path").
 * Token ids are for the record and for continuing a stream on another engine: a whole answer nobody
 * records needs neither (a failed attempt is simply sent again).
 */
export interface AnswerNeeds {
  logprobs: boolean;
  /** Absent: needed. */
  tokenIds?: boolean;
}

export interface EngineAdapter {
  readonly kind: EngineKind;
  /**
   * The request as sent to the engine: with what the router needs (token ids for failover and the
   * ledger; log-probs when `needs.logprobs`, the answer being recorded), and the request's id where the
   * engine takes it in the body. An engine whose ids come only with log-probs asks for them regardless.
   */
  decorate(api: Api, body: Json, requestId: string, needs?: AnswerNeeds): Json;
  /**
   * Whether `decorate` with these needs leaves the engine's answer as the caller asked for it, so it may
   * be relayed byte for byte, without `strip` (the lean path of a whole answer nobody records).
   */
  answersAsAsked?(needs: AnswerNeeds): boolean;
  /**
   * The lean path of a stream nobody records (lean-event.ts): one event's data, as the engine sent it, to
   * what the caller gets — what `strip` would leave, cut from the text — with the number of token ids
   * it carries for choice 0; null where the event must be parsed (a tool call, an error, a field in a
   * form it does not read as text). Absent: every event is parsed.
   */
  leanEvent?(data: string, caller: { api: Api; body: Json }): LeanEvent | null;
  /** Removes from a chunk or answer (in place) what `decorate` made the engine add and the caller (its API and body) did not ask for. */
  strip(chunk: Json, caller: { api: Api; body: Json }): void;
  read(api: Api, chunk: Json): ChunkTokens;
  /**
   * How a streamed request is first sent to this engine: as the caller sent it, unless the engine's
   * own endpoint for that API would lose ids (llama.cpp's chat stream) and another keeps them.
   */
  generation(api: Api, original: Json, calls: EngineCalls): Promise<ContinuationPlan>;
  /** How a request that is not streamed is sent, when not as the caller sent it (null or absent: as sent). */
  unary?(api: Api, original: Json): ContinuationPlan | null;
  continuation(api: Api, original: Json, prefix: ContinuationPrefix, calls: EngineCalls): Promise<ContinuationPlan>;
  /** A one-token generation: proves the engine generates, not only that its HTTP thread answers /health. */
  readonly generateProbe: { method: 'GET' | 'POST'; path: string; body: Json | null };
  /** The engine's abort call for a request id (null: closing the request's connection aborts it). */
  abortRequest(requestId: string): { path: string; body: Json } | null;
  /** The header that names a request's id on this engine (so logs, aborts and traces line up). */
  readonly requestIdHeader: string;
}

/** The caller's budget less what was generated already; min_tokens likewise. Shared by every adapter. */
export function reducedBudget(original: Json, spent: number): Json {
  const body: Json = { ...original };
  for (const key of ['max_tokens', 'max_completion_tokens', 'n_predict'] as const) {
    if (typeof original[key] === 'number') body[key] = (original[key] as number) - spent;
  }
  if (typeof original.min_tokens === 'number') body.min_tokens = Math.max(0, (original.min_tokens as number) - spent);
  return body;
}

/** vLLM's way (also SGLang's): the partial answer as a final assistant message the template leaves open. */
export function chatPrefillBody(original: Json, partialText: string, spent: number): Json {
  const body = reducedBudget(original, spent);
  if (partialText === '') return body;
  body.messages = [...(original.messages as unknown[]), { role: 'assistant', content: partialText }];
  body.continue_final_message = true;
  body.add_generation_prompt = false;
  return body;
}

/** Fields only a chat request has: a completions request built from one drops them. */
const CHAT_ONLY = [
  'messages',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'response_format',
  'chat_template_kwargs',
  'continue_final_message',
  'add_generation_prompt',
  'top_logprobs',
];

/**
 * A completions request from a token prompt (`prompt` = the ids), with the caller's sampling fields and
 * budget less what was spent, chat-only fields dropped (`max_completion_tokens` becomes `max_tokens`):
 * how every engine that takes a token prompt generates or continues from exact ids.
 */
export function tokenPromptBody(original: Json, prompt: number[], spent: number, extra: Json): Json {
  const body = reducedBudget(original, spent);
  for (const key of CHAT_ONLY) delete body[key];
  if (typeof body.max_completion_tokens === 'number') body.max_tokens = body.max_completion_tokens;
  delete body.max_completion_tokens;
  return { ...body, ...extra, prompt };
}

/** Completions from text: the prompt with the partial answer appended. */
export function textPromptBody(original: Json, partialText: string, spent: number): Json {
  // A token prompt has no text to append to: it continues from ids or not at all.
  if (typeof original.prompt !== 'string') throw new Error('a token-id prompt is continued from token ids only, and the engine did not report them all');
  const body = reducedBudget(original, spent);
  body.prompt = (original.prompt as string) + partialText;
  return body;
}

/** Choice 0 of a chunk or answer. */
export function choiceZero(chunk: Json): Json | null {
  const choices = Array.isArray(chunk.choices) ? (chunk.choices as Json[]) : [];
  return choices.find((c) => (c.index ?? 0) === 0) ?? null;
}

/** OpenAI's chat logprobs (`logprobs.content[]`), or the legacy completions shape (`logprobs.token_logprobs`). */
export function logprobValues(logprobs: Json | null | undefined): Array<number | null> {
  if (!logprobs) return [];
  if (Array.isArray(logprobs.content)) return (logprobs.content as Json[]).map((e) => (typeof e.logprob === 'number' ? e.logprob : null));
  if (Array.isArray(logprobs.token_logprobs)) return (logprobs.token_logprobs as unknown[]).map((v) => (typeof v === 'number' ? v : null));
  return [];
}

export const noTokens = (): ChunkTokens => ({ ids: [], logprobs: [], sampledSoFar: null, promptTokenIds: null });

export { isIdList } from './wire-types';

/** Whether the caller asked for log-probs itself (else the ones the router asked for are stripped). */
export function askedLogprobs(caller: { api: Api; body: Json }): boolean {
  return caller.api === 'chat' ? caller.body.logprobs === true : typeof caller.body.logprobs === 'number';
}

/** The request as the caller sent it, to the endpoint it named. */
export function asSent(api: Api, original: Json): ContinuationPlan {
  return { path: api === 'chat' ? '/v1/chat/completions' : '/v1/completions', body: original, context: 'tokens', answersAs: api };
}
