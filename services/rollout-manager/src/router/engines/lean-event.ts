/**
 * Reading and cutting one SSE event's JSON as text (pure): the lean path of a stream nobody records
 * (docs/router.md "The lean path"). An event whose only change for the caller is an id list the router
 * asked for is forwarded with that list cut out of its text, not parsed and re-serialised; anything this
 * cannot read with certainty is left to the full path, which parses.
 */

/** One event as the lean path relays it. */
export interface LeanEvent {
  /** The event's data as the caller gets it. */
  forward: string;
  /** The token ids it carries for choice 0. */
  ids: number;
}

/** Where a key's plain value sits in the text: `[from, to)` covers the key, its value and one comma beside them. */
interface FieldSpan {
  from: number;
  to: number;
  /** The number of ids in the list (0 for null or an empty list). */
  count: number;
}

/**
 * The span of `"key": [ids…]` or `"key": null` in a compact JSON object, the comma that joins it to a
 * neighbour included, so that cutting it leaves valid JSON. `absent` when the key is not there; `unread`
 * when it is there in a form this does not read (several times, spaces, a value other than a list of
 * non-negative integers or null).
 */
export function fieldSpan(text: string, key: string): FieldSpan | 'absent' | 'unread' {
  const needle = `"${key}":`;
  const at = text.indexOf(needle);
  if (at < 0) return 'absent';
  if (text.indexOf(needle, at + needle.length) >= 0) return 'unread';
  // A key follows `{` or `,`; the same characters inside a string value are escaped (\"), so never follow either.
  const before = text.charCodeAt(at - 1);
  if (before !== OPEN_BRACE && before !== COMMA) return 'unread';
  let end = at + needle.length;
  let count = 0;
  if (text.startsWith('null', end)) end += 4;
  else if (text.charCodeAt(end) === OPEN_BRACKET) {
    end += 1;
    let digits = 0;
    for (; end < text.length; end++) {
      const c = text.charCodeAt(end);
      if (c >= ZERO && c <= NINE) digits += 1;
      else if (c === COMMA && digits > 0) {
        count += 1;
        digits = 0;
      } else if (c === CLOSE_BRACKET) break;
      else return 'unread';
    }
    if (end >= text.length) return 'unread';
    if (digits > 0) count += 1;
    else if (count > 0) return 'unread';
    end += 1;
  } else return 'unread';
  // `,"key":v` loses its leading comma; `{"key":v,` its trailing one; `{"key":v}` neither.
  if (before === COMMA) return { from: at - 1, to: end, count };
  if (text.charCodeAt(end) === COMMA) return { from: at, to: end + 1, count };
  return { from: at, to: end, count };
}

/** The text with the spans cut out (spans of different keys never overlap: each is one key's value). */
export function cutSpans(text: string, spans: FieldSpan[]): string {
  if (spans.length === 0) return text;
  const sorted = [...spans].sort((a, b) => a.from - b.from);
  let out = '';
  let at = 0;
  for (const s of sorted) {
    out += text.slice(at, s.from);
    at = s.to;
  }
  return out + text.slice(at);
}

/** Whether an event carries generated text (a non-empty `content` or `text` string) somewhere. */
export function carriesText(text: string): boolean {
  for (const key of ['"content":"', '"text":"']) {
    let at = text.indexOf(key);
    while (at >= 0) {
      if (text.charCodeAt(at + key.length) !== QUOTE) return true;
      at = text.indexOf(key, at + key.length);
    }
  }
  return false;
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const QUOTE = 0x22;
const ZERO = 0x30;
const NINE = 0x39;
