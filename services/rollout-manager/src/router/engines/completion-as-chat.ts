import type { Json } from './wire-types';

/**
 * A completions chunk in the shape of a chat chunk: a chat continued from a token prompt is answered by
 * the engine's completions endpoint, and its caller must not notice (the text becomes `delta.content`;
 * legacy completions log-probs become chat's `logprobs.content`).
 */
export function completionChunkAsChat(chunk: Json): Json {
  const choices = Array.isArray(chunk.choices) ? (chunk.choices as Json[]) : [];
  return {
    ...chunk,
    object: 'chat.completion.chunk',
    choices: choices.map((c) => ({
      index: c.index ?? 0,
      delta: typeof c.text === 'string' && c.text !== '' ? { content: c.text } : {},
      logprobs: chatLogprobs((c.logprobs ?? null) as Json | null),
      finish_reason: c.finish_reason ?? null,
    })),
  };
}

function chatLogprobs(logprobs: Json | null): Json | null {
  if (!logprobs) return null;
  if (Array.isArray(logprobs.content)) return logprobs;
  const tokens = Array.isArray(logprobs.tokens) ? (logprobs.tokens as unknown[]) : [];
  const values = Array.isArray(logprobs.token_logprobs) ? (logprobs.token_logprobs as unknown[]) : [];
  return { content: tokens.map((token, i) => ({ token, logprob: values[i] ?? null, bytes: null, top_logprobs: [] })) };
}
