import { endStream, writeEvent } from './openai-responses';
import { RequestContext } from './request-context';
import { Json } from './stream-splice';
import { ROLLOUT_HEADER } from './trajectory-identity';

/**
 * Answer a retried request from its stored turn, in the shape the caller asked for (JSON or SSE, chat
 * or completions): the retry gets what the first try generated, and nothing is generated again.
 */
export function replay(ctx: RequestContext, content: unknown): void {
  const res = ctx.res;
  const created = Math.floor(Date.now() / 1000);
  const id = `replay-${created}`;
  const model = ctx.body.model ?? null;
  const message = (ctx.api === 'chat' ? content : null) as Json | null;
  const toolCalls = message && Array.isArray(message.tool_calls) ? (message.tool_calls as Json[]) : [];
  // The stored turn keeps the message, not the finish reason: tool calls imply 'tool_calls', anything else 'stop'.
  const finishReason = toolCalls.length > 0 ? 'tool_calls' : 'stop';
  const headers = { [ROLLOUT_HEADER]: 'replay' };
  if (!ctx.stream) {
    const choice =
      ctx.api === 'chat'
        ? { index: 0, message, logprobs: null, finish_reason: finishReason }
        : { index: 0, text: content, logprobs: null, finish_reason: finishReason };
    const body = { id, object: ctx.api === 'chat' ? 'chat.completion' : 'text_completion', created, model, choices: [choice], usage: null };
    res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...headers });
  if (ctx.api === 'chat') {
    const chunk = (delta: Json, finish: string | null = null) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
    writeEvent(res, chunk({ role: 'assistant', content: '' }));
    if (typeof message?.content === 'string' && message.content !== '') writeEvent(res, chunk({ content: message.content }));
    if (toolCalls.length > 0) writeEvent(res, chunk({ tool_calls: toolCalls.map((c, index) => ({ index, ...c })) }));
    writeEvent(res, chunk({}, finishReason));
  } else {
    writeEvent(res, { id, object: 'text_completion', created, model, choices: [{ index: 0, text: content, logprobs: null, finish_reason: null }] });
    writeEvent(res, { id, object: 'text_completion', created, model, choices: [{ index: 0, text: '', logprobs: null, finish_reason: finishReason }] });
  }
  endStream(res);
}
