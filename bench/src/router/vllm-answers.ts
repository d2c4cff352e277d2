/**
 * What a fake engine answers, in vLLM 0.32's shapes (docs/engine-api-shapes.md §1a, §1i): the fields the
 * router's vLLM adapter reads (`return_token_ids` → `token_ids` and `prompt_token_ids`, log-probs when
 * asked, `usage`) are there, so the router's normal path runs, not a fallback for an engine that says less.
 */

export const MODEL = 'fake-model';
/** Every answer is the same 16 tokens (fewer when `max_tokens` asks fewer). */
const WORDS = [' The', ' answer', ' is', ' forty', '-', 'two', ',', ' as', ' the', ' fake', ' engine', ' always', ' says', ' at', ' once', '.'];
const IDS = WORDS.map((_, i) => 1000 + i);
const BYTES = WORDS.map((w) => [...Buffer.from(w, 'utf8')]);
const LOGPROB = -0.01;

type Json = Record<string, unknown>;

/** What one request asked for, read once from its body. */
export interface Asked {
  api: 'chat' | 'completions';
  stream: boolean;
  usage: boolean;
  tokenIds: boolean;
  /** Chat: `logprobs: true`; completions: a number of top log-probs. */
  logprobs: boolean;
  count: number;
  promptIds: number[];
  id: string;
  created: number;
}

export function askedOf(api: 'chat' | 'completions', body: Json, requestId: string): Asked {
  const max =
    typeof body.max_tokens === 'number' ? body.max_tokens : typeof body.max_completion_tokens === 'number' ? body.max_completion_tokens : WORDS.length;
  const options = (body.stream_options ?? {}) as Json;
  return {
    api,
    stream: body.stream === true,
    usage: options.include_usage === true,
    tokenIds: body.return_token_ids === true,
    logprobs: api === 'chat' ? body.logprobs === true : typeof body.logprobs === 'number',
    count: Math.max(1, Math.min(WORDS.length, Math.floor(max))),
    promptIds: promptIdsOf(api, body),
    id: `${api === 'chat' ? 'chatcmpl' : 'cmpl'}-${requestId}`,
    created: Math.floor(Date.now() / 1000),
  };
}

/** The answer's text, as the caller reads it back (what multi-turn conversations carry on). */
export function answerText(asked: Asked): string {
  return WORDS.slice(0, asked.count).join('');
}

/** A token-id prompt as given; text is "tokenized" at about four characters a token, as a real tokenizer would count. */
function promptIdsOf(api: 'chat' | 'completions', body: Json): number[] {
  if (api === 'completions' && Array.isArray(body.prompt) && body.prompt.every((x) => typeof x === 'number')) return body.prompt as number[];
  const chars = api === 'chat' ? JSON.stringify(body.messages ?? []).length : String(body.prompt ?? '').length;
  return Array.from({ length: Math.max(1, Math.ceil(chars / 4)) }, (_, i) => (i * 7919) % 32_000);
}

function usageOf(a: Asked): Json {
  return { prompt_tokens: a.promptIds.length, completion_tokens: a.count, total_tokens: a.promptIds.length + a.count };
}

function finishOf(a: Asked): string {
  return a.count < WORDS.length ? 'length' : 'stop';
}

function chatLogprobs(from: number, to: number): Json {
  return { content: WORDS.slice(from, to).map((token, k) => ({ token, logprob: LOGPROB, bytes: BYTES[from + k], top_logprobs: [] })) };
}

function completionLogprobs(from: number, to: number): Json {
  const tokens = WORDS.slice(from, to);
  let offset = WORDS.slice(0, from).join('').length;
  const text_offset = tokens.map((t) => (offset += t.length) - t.length);
  return { text_offset, token_logprobs: tokens.map(() => LOGPROB), tokens, top_logprobs: tokens.map((t) => ({ [t]: LOGPROB })) };
}

/** The SSE events of a streamed answer, `[DONE]` last: a role chunk, one chunk a token, the usage chunk when asked. */
export function streamEvents(a: Asked): string[] {
  const head = { id: a.id, object: a.api === 'chat' ? 'chat.completion.chunk' : 'text_completion', created: a.created, model: MODEL };
  const events: Json[] = [];
  if (a.api === 'chat') {
    events.push({
      ...head,
      ...(a.tokenIds ? { prompt_token_ids: a.promptIds } : {}),
      choices: [{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
    });
  }
  for (let i = 0; i < a.count; i++) {
    const last = i === a.count - 1;
    const choice: Json =
      a.api === 'chat'
        ? { index: 0, delta: { content: WORDS[i] }, logprobs: a.logprobs ? chatLogprobs(i, i + 1) : null }
        : { index: 0, text: WORDS[i], logprobs: a.logprobs ? completionLogprobs(i, i + 1) : null };
    if (a.tokenIds) {
      choice.token_ids = [IDS[i]];
      if (a.api === 'completions' && i === 0) choice.prompt_token_ids = a.promptIds;
    }
    choice.finish_reason = last ? finishOf(a) : null;
    if (last) choice.stop_reason = null;
    events.push({ ...head, choices: [choice] });
  }
  if (a.usage) events.push({ ...head, choices: [], usage: usageOf(a) });
  return [...events.map((e) => `data: ${JSON.stringify(e)}\n\n`), 'data: [DONE]\n\n'];
}

/** A non-streamed answer: the whole of it in one JSON object. */
export function wholeAnswer(a: Asked): Json {
  const ids = a.tokenIds ? { token_ids: IDS.slice(0, a.count) } : {};
  if (a.api === 'chat') {
    return {
      id: a.id,
      object: 'chat.completion',
      created: a.created,
      model: MODEL,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: answerText(a), tool_calls: [], reasoning_content: null },
          logprobs: a.logprobs ? chatLogprobs(0, a.count) : null,
          finish_reason: finishOf(a),
          stop_reason: null,
          ...ids,
        },
      ],
      usage: usageOf(a),
      ...(a.tokenIds ? { prompt_token_ids: a.promptIds } : {}),
    };
  }
  return {
    id: a.id,
    object: 'text_completion',
    created: a.created,
    model: MODEL,
    choices: [
      {
        index: 0,
        text: answerText(a),
        logprobs: a.logprobs ? completionLogprobs(0, a.count) : null,
        finish_reason: finishOf(a),
        stop_reason: null,
        ...ids,
        ...(a.tokenIds ? { prompt_token_ids: a.promptIds } : {}),
        prompt_logprobs: null,
      },
    ],
    usage: usageOf(a),
  };
}

/** `GET /v1/models`, as vLLM lists its one model. */
export function modelList(): Json {
  return {
    object: 'list',
    data: [{ id: MODEL, object: 'model', created: 1, owned_by: 'vllm', root: MODEL, parent: null, max_model_len: 32768, permission: [] }],
  };
}
