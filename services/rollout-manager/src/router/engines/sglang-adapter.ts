import type { Api, Json } from '../stream-splice';
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
  reducedBudget,
  textPromptBody,
} from './engine-adapter';

/**
 * SGLang's server (shapes in docs/engine-api-shapes.md, from SGLang's OpenAI protocol and
 * tokenizer-manager code; contract-tested in engine-adapters.contract.spec.ts).
 *
 * - Token ids: its OpenAI log-probs carry token text, not ids; `return_tokens_as_token_ids` is not
 *   SGLang's. So a chat stream's ids are unknown and a chat continues from text (`continue_final_message`,
 *   which SGLang's chat endpoint honours). Completions continue from a token prompt when the ids are
 *   known (another engine reported them), since `/v1/completions` takes a token-id list.
 * - Abort: `POST /abort_request {"rid"}`; the router puts its request id in `rid`.
 * - Health: `/health_generate` runs a one-token generation through the scheduler — the probe that tells
 *   a wedged scheduler from a living HTTP thread.
 */
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

export class SglangAdapter implements EngineAdapter {
  readonly kind = 'sglang' as const;
  readonly generateProbe = { method: 'GET' as const, path: '/health_generate', body: null };
  readonly requestIdHeader = 'x-request-id';
  readonly faultToleranceStatusPath = null;

  decorate(api: Api, body: Json, requestId: string): Json {
    const out: Json = { ...body, rid: body.rid ?? requestId };
    if (api === 'chat' && out.logprobs !== true) out.logprobs = true;
    if (api === 'completions' && typeof out.logprobs !== 'number') out.logprobs = 0;
    return out;
  }

  strip(chunk: Json, caller: { api: Api; body: Json }): void {
    if (!askedLogprobs(caller)) for (const c of (chunk.choices as Json[] | undefined) ?? []) if ('logprobs' in c) c.logprobs = null;
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
      promptTokenIds: null,
    };
  }

  async generation(api: Api, original: Json): Promise<ContinuationPlan> {
    return asSent(api, original);
  }

  async continuation(api: Api, original: Json, prefix: ContinuationPrefix, calls: EngineCalls): Promise<ContinuationPlan> {
    void calls;
    if (api === 'chat' || prefix.tokenIds === null || prefix.promptTokenIds === null || prefix.text === '') {
      return api === 'chat'
        ? { path: '/v1/chat/completions', body: chatPrefillBody(original, prefix.text, prefix.tokens), context: 'text', answersAs: 'chat' }
        : { path: '/v1/completions', body: textPromptBody(original, prefix.text, prefix.tokens), context: 'text', answersAs: 'completions' };
    }
    const body = reducedBudget(original, prefix.tokens);
    for (const key of CHAT_ONLY) delete body[key];
    body.prompt = [...prefix.promptTokenIds, ...prefix.tokenIds];
    return { path: '/v1/completions', body, context: 'tokens', answersAs: 'completions' };
  }

  abortRequest(requestId: string): { path: string; body: Json } {
    return { path: '/abort_request', body: { rid: requestId } };
  }
}
