import { carriesText, cutSpans, fieldSpan } from './lean-event';
import { VllmAdapter } from './vllm-adapter';

/** Cutting a field out of an event's text must leave what parsing, deleting and re-serialising would. */
function cutAsParsed(text: string, key: string, inChoice: boolean): string {
  const parsed = JSON.parse(text) as Record<string, unknown>;
  if (inChoice) for (const c of parsed.choices as Array<Record<string, unknown>>) delete c[key];
  else delete parsed[key];
  return JSON.stringify(parsed);
}

describe('lean events: reading and cutting id lists from the text', () => {
  const chunk = (choice: string, top = '') => `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",${top}"choices":[${choice}]}`;

  it.each([
    ['in the middle', chunk('{"index":0,"delta":{"content":"Hi"},"logprobs":null,"token_ids":[9707,11],"finish_reason":null}'), 2],
    ['last in its object', chunk('{"index":0,"delta":{"content":"Hi"},"finish_reason":null,"token_ids":[9707]}'), 1],
    ['first in its object', chunk('{"token_ids":[1,2,3],"index":0,"delta":{"content":"Hi"}}'), 3],
    ['alone in its object', chunk('{"token_ids":[4]}'), 1],
    ['empty', chunk('{"index":0,"delta":{"content":""},"token_ids":[],"finish_reason":"stop"}'), 0],
    ['null', chunk('{"index":0,"delta":{"content":""},"token_ids":null}'), 0],
  ])('cuts token_ids %s exactly as deleting it from the parsed event would', (_, text, count) => {
    const span = fieldSpan(text, 'token_ids');
    if (typeof span === 'string') throw new Error(`not read: ${span}`);
    expect(span.count).toBe(count);
    expect(cutSpans(text, [span])).toBe(cutAsParsed(text, 'token_ids', true));
  });

  it('cuts a top-level prompt_token_ids and the choice token_ids together', () => {
    const text = chunk('{"index":0,"delta":{"role":"assistant","content":""},"token_ids":[5]}', '"prompt_token_ids":[151644,872,9707],');
    const spans = [fieldSpan(text, 'prompt_token_ids'), fieldSpan(text, 'token_ids')];
    if (spans.some((s) => typeof s === 'string')) throw new Error('not read');
    const expected = JSON.parse(text) as { prompt_token_ids?: unknown; choices: Array<Record<string, unknown>> };
    delete expected.prompt_token_ids;
    delete expected.choices[0]!.token_ids;
    expect(cutSpans(text, spans as Exclude<(typeof spans)[number], string>[])).toBe(JSON.stringify(expected));
  });

  it.each([
    ['spaces after the colon', chunk('{"index":0,"token_ids": [1]}')],
    ['a list of other than ids', chunk('{"index":0,"token_ids":[1,-2]}')],
    ['floats', chunk('{"index":0,"token_ids":[1.5]}')],
    ['an object', chunk('{"index":0,"token_ids":{"a":1}}')],
    ['twice (two choices)', chunk('{"index":0,"token_ids":[1]},{"index":1,"token_ids":[2]}')],
    ['an empty slot', chunk('{"index":0,"token_ids":[1,,2]}')],
    ['a trailing comma', chunk('{"index":0,"token_ids":[1,]}')],
    ['unterminated', '{"choices":[{"token_ids":[1,2'],
  ])('leaves a list in another form to the full path: %s', (_, text) => {
    expect(fieldSpan(text, 'token_ids')).toBe('unread');
  });

  it('never reads a key inside a string', () => {
    // The caller's text holding the key's own spelling is escaped in JSON: no match, or not after { or ,.
    const text = chunk('{"index":0,"delta":{"content":"say \\"token_ids\\":[1]"},"finish_reason":null}');
    expect(fieldSpan(text, 'token_ids')).toBe('absent');
    const tricky = '{"a":"x\\",\\"token_ids\\":[1]"}';
    expect(JSON.parse(tricky)).toEqual({ a: 'x","token_ids":[1]' });
    expect(fieldSpan(tricky, 'token_ids')).toBe('absent');
    expect(fieldSpan('{"\\"token_ids":[1]}', 'token_ids')).toBe('unread');
  });

  it('tells whether an event carries text', () => {
    expect(carriesText(chunk('{"index":0,"delta":{"content":"Hi"}}'))).toBe(true);
    expect(carriesText(chunk('{"index":0,"delta":{"content":"\\n"}}'))).toBe(true);
    expect(carriesText('{"choices":[{"index":0,"text":" world"}]}')).toBe(true);
    expect(carriesText(chunk('{"index":0,"delta":{"role":"assistant","content":""}}'))).toBe(false);
    expect(carriesText(chunk('{"index":0,"delta":{},"finish_reason":"stop"}'))).toBe(false);
    expect(carriesText('{"choices":[],"usage":{"completion_tokens":3}}')).toBe(false);
  });
});

describe("vLLM's lean events", () => {
  const vllm = new VllmAdapter();
  const caller = { api: 'chat' as const, body: { messages: [], stream: true } };

  it('forwards an event as strip would leave it, and counts its ids', () => {
    const data =
      '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"token_ids":[9707],"finish_reason":null}]}';
    const event = vllm.leanEvent(data, caller);
    const parsed = JSON.parse(data) as Record<string, unknown>;
    vllm.strip(parsed, caller);
    expect(event).toEqual({ forward: JSON.stringify(parsed), ids: 1 });
  });

  it('keeps the ids where the caller asked for them', () => {
    const data = '{"id":"c","prompt_token_ids":[1,2],"choices":[{"index":0,"delta":{"content":"Hi"},"token_ids":[3]}]}';
    expect(vllm.leanEvent(data, { api: 'chat', body: { ...caller.body, return_token_ids: true } })).toEqual({ forward: data, ids: 1 });
  });

  it.each([
    ['a tool call', '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]},"token_ids":[1]}]}'],
    ['an error', '{"error":{"message":"boom","code":500}}'],
    ['text without ids (an older vLLM)', '{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}'],
    ['ids it cannot read', '{"choices":[{"index":0,"delta":{"content":"Hi"},"token_ids":[1.0]}]}'],
  ])('leaves %s to the full path', (_, data) => {
    expect(vllm.leanEvent(data, caller)).toBeNull();
  });

  it('relays the usage event and the role event, which carry no ids', () => {
    const usage = '{"id":"c","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}';
    expect(vllm.leanEvent(usage, caller)).toEqual({ forward: usage, ids: 0 });
    const role = '{"id":"c","prompt_token_ids":[7,8],"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}';
    expect(vllm.leanEvent(role, caller)).toEqual({
      forward: '{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}',
      ids: 0,
    });
  });
});
