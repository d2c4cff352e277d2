import type { Answer } from './request-context';
import { Api, Json, StreamSplice } from './stream-splice';

/** The answer a (possibly spliced) stream amounts to, in the shape a non-streaming answer is recorded in. */
export function streamAnswer(api: Api, splice: StreamSplice): Omit<Answer, 'engines'> {
  const tokens = typeof splice.usage?.completion_tokens === 'number' ? (splice.usage.completion_tokens as number) : splice.tokens;
  const spans = splice.ledger.record();
  if (api === 'completions') return { content: splice.text, finishReason: splice.finishReason, tokens, spans };
  const message: Json = { role: 'assistant', content: splice.text === '' && splice.toolCalls.length > 0 ? null : splice.text };
  if (splice.toolCalls.length > 0) message.tool_calls = splice.toolCalls;
  return { content: message, finishReason: splice.finishReason, tokens, spans };
}
