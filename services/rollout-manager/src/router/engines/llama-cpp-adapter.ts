import type { Api, Json } from './wire-types';
import {
  asSent,
  askedLogprobs,
  chatPrefillBody,
  choiceZero,
  ChunkTokens,
  ContinuationPlan,
  ContinuationPrefix,
  EngineAdapter,
  EngineCalls,
  isIdList,
  logprobValues,
  textPromptBody,
  tokenPromptBody,
} from './engine-adapter';

/**
 * llama.cpp's server (tools/server; shapes in docs/engine-api-shapes.md, checked against a running
 * llama-server in test/e2e/real-engine.int.spec.ts).
 *
 * - Token ids: `logprobs.content[].id` on every chunk when log-probs are asked for; `timings.predicted_n`
 *   (with `timings_per_token`) is its own count of sampled tokens. Its stream leaves out the ids of
 *   tokens that end inside a multi-byte character (they are sent with the token that completes it, whose
 *   id alone is given): the count is what shows the gap.
 * - Continuation from tokens: `POST /v1/completions` takes a token-id array as the prompt, verbatim (no
 *   BOS added); a chat prompt's ids are `POST /apply-template` (the exact text the chat endpoint renders)
 *   then `POST /tokenize` with `add_special` and `parse_special`, as the chat endpoint tokenises it.
 * - Continuation from text: a chat request whose last message is the assistant's is a prefill (the
 *   server's default); completions get the text appended to the prompt.
 * - Abort: closing the connection cancels the task. Health: `/health` answers from the HTTP thread
 *   (a slot can be wedged while it says ok): the generate probe is a one-token completion.
 */
export class LlamaCppAdapter implements EngineAdapter {
  readonly kind = 'llama.cpp' as const;
  readonly generateProbe = { method: 'POST' as const, path: '/v1/completions', body: { prompt: 'a', max_tokens: 1, temperature: 0, cache_prompt: false } };
  readonly requestIdHeader = 'x-request-id';

  decorate(api: Api, body: Json): Json {
    const out: Json = { ...body, timings_per_token: true };
    if (api === 'chat') {
      if (out.logprobs !== true) out.logprobs = true;
      if (typeof out.top_logprobs !== 'number') out.top_logprobs = 0;
    } else if (typeof out.logprobs !== 'number' || out.logprobs < 1) {
      out.logprobs = 1;
    }
    return out;
  }

  strip(chunk: Json, caller: { api: Api; body: Json }): void {
    if (!askedLogprobs(caller)) for (const c of (chunk.choices as Json[] | undefined) ?? []) if ('logprobs' in c) c.logprobs = null;
    // Per-token timings were the router's request; the final chunk carries them anyway (the server's default).
    if (caller.body.timings_per_token !== true && chunk.usage === undefined) delete chunk.timings;
  }

  read(_api: Api, chunk: Json): ChunkTokens {
    const choice = choiceZero(chunk);
    const logprobs = (choice?.logprobs ?? null) as Json | null;
    const entries = logprobs && Array.isArray(logprobs.content) ? (logprobs.content as Json[]) : [];
    const ids = entries.map((e) => e.id).filter((id): id is number => Number.isInteger(id));
    const values = ids.length === entries.length ? logprobValues(logprobs) : [];
    const timings = chunk.timings as Json | undefined;
    const usage = chunk.usage as Json | undefined;
    const sampledSoFar =
      typeof timings?.predicted_n === 'number' ? timings.predicted_n : typeof usage?.completion_tokens === 'number' ? usage.completion_tokens : null;
    return { ids: values.length === ids.length ? ids : [], logprobs: values, sampledSoFar, promptTokenIds: null };
  }

  /**
   * A chat stream goes through the completions endpoint from the rendered template's ids: llama.cpp's chat
   * stream sends a chunk only when the text changes, so a token without text (a control token) is sampled
   * and its id and log-prob never sent; its completions stream sends every token. A chat with tools or a
   * response format stays on the chat endpoint (its parsers live there), ids possibly incomplete — which
   * the engine's own count then shows.
   */
  async generation(api: Api, original: Json, calls: EngineCalls): Promise<ContinuationPlan> {
    if (api !== 'chat' || original.tools !== undefined || original.response_format !== undefined) return asSent(api, original);
    const promptIds = await this.promptTokenIds(api, original, calls);
    if (promptIds === null) return asSent(api, original);
    return { ...this.tokenPrompt(original, promptIds, [], 0), promptTokenIds: promptIds };
  }

  async continuation(api: Api, original: Json, prefix: ContinuationPrefix, calls: EngineCalls): Promise<ContinuationPlan> {
    const byText = (): ContinuationPlan =>
      api === 'chat'
        ? { path: '/v1/chat/completions', body: llamaPrefill(original, prefix), context: 'text', answersAs: 'chat' }
        : { path: '/v1/completions', body: textPromptBody(original, prefix.text, prefix.tokens), context: 'text', answersAs: 'completions' };
    if (prefix.tokenIds === null || prefix.text === '') return byText();
    // A completions answer carries no parsed tool calls or schema-checked JSON: those chats continue from text.
    if (api === 'chat' && (original.tools !== undefined || original.response_format !== undefined)) return byText();
    const promptIds = prefix.promptTokenIds ?? (await this.promptTokenIds(api, original, calls));
    if (promptIds === null) return byText();
    return this.tokenPrompt(original, promptIds, prefix.tokenIds, prefix.tokens);
  }

  /** The completions request that generates the rest of `original` after the given ids. */
  private tokenPrompt(original: Json, promptIds: number[], sampled: number[], spent: number): ContinuationPlan {
    return {
      path: '/v1/completions',
      body: tokenPromptBody(original, [...promptIds, ...sampled], spent, { logprobs: 1 }),
      context: 'tokens',
      answersAs: 'completions',
    };
  }

  abortRequest(): null {
    return null;
  }

  /** The prompt's ids as the engine's chat or completions endpoint tokenises it; null when the engine cannot say. */
  private async promptTokenIds(api: Api, original: Json, calls: EngineCalls): Promise<number[] | null> {
    let text: unknown = original.prompt;
    if (api === 'chat') {
      const rendered = await calls.postJson('/apply-template', {
        messages: original.messages,
        ...(original.chat_template_kwargs ? { chat_template_kwargs: original.chat_template_kwargs } : {}),
      });
      if (rendered.status !== 200 || typeof rendered.body?.prompt !== 'string') return null;
      text = rendered.body.prompt;
    }
    if (typeof text !== 'string') return null;
    const tokenized = await calls.postJson('/tokenize', { content: text, add_special: true, parse_special: true });
    const tokens = tokenized.body?.tokens;
    return tokenized.status === 200 && isIdList(tokens) ? tokens : null;
  }
}

/** llama.cpp continues a final assistant message by default (assistant prefill); vLLM's flags are not its own. */
function llamaPrefill(original: Json, prefix: ContinuationPrefix): Json {
  const body = chatPrefillBody(original, prefix.text, prefix.tokens);
  delete body.continue_final_message;
  delete body.add_generation_prompt;
  return body;
}
