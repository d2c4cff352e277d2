import { ChatMessage, chatReplyFor, toolResultFor, ToolCall } from './fake-inference-engine';

/**
 * A minimal OpenAI-API client for tests: chat and completions, streaming (SSE) or not, and the agent
 * loop of an RL rollout worker (generate → call the tool → feed the result back → until an answer).
 */
/** What a direct, undisturbed agent loop produces: the engine is deterministic, so this is the only right answer. */
export async function expectedConversation(initial: ChatMessage[], toolRounds: number, tokensPerReply = 16): Promise<ChatMessage[]> {
  const messages = [...initial];
  for (;;) {
    const reply = chatReplyFor(messages, { toolRounds, tokensPerReply });
    const content = reply.tokens.join('');
    const message: ChatMessage = { role: 'assistant', content: reply.toolCall && content === '' ? null : content };
    if (reply.toolCall) message.tool_calls = [reply.toolCall];
    messages.push(message);
    if (!reply.toolCall) return messages;
    messages.push({ role: 'tool', tool_call_id: reply.toolCall.id, content: toolResultFor(reply.toolCall) });
  }
}

export async function agentLoop(
  url: string,
  initial: ChatMessage[],
  headers: Record<string, string>,
  options: { stream?: boolean; onResponse?: (engineId: string) => void } = {},
): Promise<ChatMessage[]> {
  const messages = [...initial];
  for (let round = 0; round < 10; round++) {
    const body = { model: 'fake-model', messages, tools: [{ type: 'function', function: { name: 'lookup' } }] };
    const answer = options.stream ? await streamChat(url, { ...body, stream: true }, headers) : await chat(url, body, headers);
    options.onResponse?.(answer.engineId!);
    messages.push(answer.message);
    const calls = answer.message.tool_calls ?? [];
    if (calls.length === 0) return messages;
    for (const call of calls) messages.push({ role: 'tool', tool_call_id: call.id, content: toolResultFor(call) });
  }
  throw new Error('the agent loop did not finish');
}

export function post(base: string, path: string, body: unknown, headers: Record<string, string>): Promise<Response> {
  return fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

export interface ChatAnswer {
  message: ChatMessage;
  finishReason: string | null;
  engineId: string | null;
}

export async function chat(base: string, body: unknown, headers: Record<string, string>): Promise<ChatAnswer> {
  const res = await post(base, '/v1/chat/completions', body, headers);
  if (res.status !== 200) throw new Error(`chat answered ${res.status}: ${await res.text()}`);
  const json = (await res.json()) as { choices: Array<{ message: ChatMessage; finish_reason: string | null }> };
  const message = { ...json.choices[0].message };
  if (!message.tool_calls) delete message.tool_calls;
  return { message, finishReason: json.choices[0].finish_reason, engineId: res.headers.get('x-robustrl-rollout') };
}

export interface StreamAnswer extends ChatAnswer {
  text: string;
  done: boolean;
  ids: Set<string>;
  roleChunks: number;
  /** Every event's data as received, `[DONE]` included. */
  events: string[];
}

/** An OpenAI streaming client: accumulates the deltas; `then` runs once after `afterChunks` content chunks. */
export async function streamChat(
  base: string,
  body: unknown,
  headers: Record<string, string>,
  hook?: { afterChunks: number; then: (engineId: string | null) => void },
): Promise<StreamAnswer> {
  const res = await post(base, '/v1/chat/completions', body, headers);
  if (res.status !== 200) throw new Error(`stream answered ${res.status}: ${await res.text()}`);
  const engineId = res.headers.get('x-robustrl-rollout');
  let text = '';
  let finishReason: string | null = null;
  let done = false;
  let contentChunks = 0;
  let roleChunks = 0;
  const ids = new Set<string>();
  const calls = new Map<number, ToolCall>();
  const events: string[] = [];
  for await (const data of sseEvents(res)) {
    events.push(data);
    if (data === '[DONE]') {
      done = true;
      continue;
    }
    const chunk = JSON.parse(data) as {
      id: string;
      error?: unknown;
      choices: Array<{
        delta: { role?: string; content?: string; tool_calls?: Array<{ index: number; id?: string; function?: { name?: string; arguments?: string } }> };
        finish_reason: string | null;
      }>;
    };
    if (chunk.error) throw new Error(`stream error: ${JSON.stringify(chunk.error)}`);
    ids.add(chunk.id);
    for (const choice of chunk.choices) {
      if (choice.delta.role) roleChunks += 1;
      if (choice.delta.content) {
        text += choice.delta.content;
        contentChunks += 1;
        if (hook && contentChunks === hook.afterChunks) hook.then(engineId);
      }
      for (const d of choice.delta.tool_calls ?? []) {
        const call = calls.get(d.index) ?? { id: '', type: 'function' as const, function: { name: '', arguments: '' } };
        if (d.id) call.id = d.id;
        if (d.function?.name) call.function.name = d.function.name;
        call.function.arguments += d.function?.arguments ?? '';
        calls.set(d.index, call);
      }
      if (choice.finish_reason) finishReason = choice.finish_reason;
    }
  }
  const message: ChatMessage = { role: 'assistant', content: text === '' && calls.size > 0 ? null : text };
  if (calls.size > 0) message.tool_calls = [...calls.values()];
  return { message, finishReason, engineId, text, done, ids, roleChunks, events };
}

export async function streamCompletion(
  base: string,
  body: unknown,
  headers: Record<string, string>,
  hook?: { afterChunks: number; then: (engineId: string | null) => void },
): Promise<{ text: string; finishReason: string | null; engineId: string | null }> {
  const res = await post(base, '/v1/completions', body, headers);
  if (res.status !== 200) throw new Error(`stream answered ${res.status}: ${await res.text()}`);
  const engineId = res.headers.get('x-robustrl-rollout');
  let text = '';
  let finishReason: string | null = null;
  let chunks = 0;
  for await (const data of sseEvents(res)) {
    if (data === '[DONE]') continue;
    const chunk = JSON.parse(data) as { choices: Array<{ text: string; finish_reason: string | null }> };
    for (const c of chunk.choices) {
      if (c.text) {
        text += c.text;
        chunks += 1;
        if (hook && chunks === hook.afterChunks) hook.then(engineId);
      }
      if (c.finish_reason) finishReason = c.finish_reason;
    }
  }
  return { text, finishReason, engineId };
}

async function* sseEvents(res: Response): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(piece, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n');
      if (data) yield data;
    }
  }
}
