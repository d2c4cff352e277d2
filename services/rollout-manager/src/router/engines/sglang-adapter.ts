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
 * SGLang's server (shapes in docs/engine-api-shapes.md §2, from SGLang's http_server.py, io_struct.py and
 * OpenAI protocol.py; contract-tested in engine-adapters.contract.spec.ts — no SGLang runs here).
 *
 * - Token ids: its chat stream carries none (chat log-probs hold token text, and the stream choice has no
 *   `token_ids`), so a chat's spans record the engine, count and context without ids, and a chat
 *   continues from text (`continue_final_message`; SGLang has no `add_generation_prompt` field).
 *   Completions take `return_token_ids`: every stream choice then carries `token_ids`, the first
 *   `prompt_token_ids`, and a completions stream continues from a token prompt.
 * - Abort: `POST /abort_request {"rid"}`; the router's request id goes in `rid`.
 * - Health: `/health_generate` runs a one-token generation through the scheduler (503 after 20 s without
 *   output) — the probe that tells a wedged scheduler from a living HTTP thread.
 */
export class SglangAdapter implements EngineAdapter {
  readonly kind = 'sglang' as const;
  readonly generateProbe = { method: 'GET' as const, path: '/health_generate', body: null };
  readonly requestIdHeader = 'x-request-id';

  decorate(api: Api, body: Json, requestId: string): Json {
    const out: Json = { ...body, rid: body.rid ?? requestId };
    if (api === 'chat' && out.logprobs !== true) out.logprobs = true;
    if (api === 'completions') {
      out.return_token_ids = true;
      if (typeof out.logprobs !== 'number') out.logprobs = 1;
    }
    return out;
  }

  strip(chunk: Json, caller: { api: Api; body: Json }): void {
    for (const c of (chunk.choices as Json[] | undefined) ?? []) {
      if (!askedLogprobs(caller) && 'logprobs' in c) c.logprobs = null;
      if (caller.body.return_token_ids !== true) {
        delete c.token_ids;
        delete c.prompt_token_ids;
      }
    }
  }

  read(_api: Api, chunk: Json): ChunkTokens {
    const choice = choiceZero(chunk);
    const ids = isIdList(choice?.token_ids) ? (choice.token_ids as number[]) : [];
    const values = logprobValues((choice?.logprobs ?? null) as Json | null);
    const usage = chunk.usage as Json | undefined;
    return {
      ids,
      logprobs: values.length === ids.length ? values : ids.map(() => null),
      sampledSoFar: typeof usage?.completion_tokens === 'number' ? usage.completion_tokens : null,
      promptTokenIds: isIdList(choice?.prompt_token_ids) ? (choice.prompt_token_ids as number[]) : null,
    };
  }

  async generation(api: Api, original: Json): Promise<ContinuationPlan> {
    return asSent(api, original);
  }

  async continuation(api: Api, original: Json, prefix: ContinuationPrefix, calls: EngineCalls): Promise<ContinuationPlan> {
    void calls;
    if (api === 'chat' || prefix.tokenIds === null || prefix.promptTokenIds === null || prefix.text === '') {
      return api === 'chat'
        ? { path: '/v1/chat/completions', body: sglangPrefill(original, prefix), context: 'text', answersAs: 'chat' }
        : { path: '/v1/completions', body: textPromptBody(original, prefix.text, prefix.tokens), context: 'text', answersAs: 'completions' };
    }
    const body = tokenPromptBody(original, [...prefix.promptTokenIds, ...prefix.tokenIds], prefix.tokens, {});
    return { path: '/v1/completions', body, context: 'tokens', answersAs: 'completions' };
  }

  abortRequest(requestId: string): { path: string; body: Json } {
    return { path: '/abort_request', body: { rid: requestId } };
  }
}

/** SGLang's chat request has `continue_final_message` but no `add_generation_prompt`. */
function sglangPrefill(original: Json, prefix: ContinuationPrefix): Json {
  const body = chatPrefillBody(original, prefix.text, prefix.tokens);
  delete body.add_generation_prompt;
  return body;
}
