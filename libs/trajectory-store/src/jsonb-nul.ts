/**
 * PostgreSQL's JSONB (and TEXT) cannot hold the NUL character: `\u0000` in a JSON value fails the whole
 * statement ("unsupported Unicode escape sequence"). Models do sample it — a byte-fallback token for
 * 0x00 is an ordinary token (found by the router's test on a real llama.cpp engine) — and a trajectory
 * must be stored exactly as sampled: the router compares the next request's echo of a turn with the
 * stored turn, so a lossy replacement would read as an edited history.
 *
 * So a string holding NUL is stored as `{"$nul": [the pieces between the NULs]}` and read back joined;
 * an object that already has the one key `$nul` is wrapped the same way (`{"$nul": {…}}` is never a
 * string's form), so every value round-trips. Values without NUL or such objects are stored as they are.
 */
const MARK = '$nul';

export function encodeNul(value: unknown): unknown {
  if (typeof value === 'string') return value.includes('\u0000') ? { [MARK]: value.split('\u0000') } : value;
  if (Array.isArray(value)) return value.map(encodeNul);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    // A key is an API field name: one holding NUL is not worth a lossless form, only a statement that does not fail.
    for (const [k, v] of Object.entries(value)) out[k.replaceAll('\u0000', '\uFFFD')] = encodeNul(v);
    return isMarked(out) ? { [MARK]: out } : out;
  }
  return value;
}

export function decodeNul(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(decodeNul);
  if (value !== null && typeof value === 'object') {
    if (isMarked(value)) {
      const inner = (value as Record<string, unknown>)[MARK];
      if (Array.isArray(inner) && inner.every((p) => typeof p === 'string')) return inner.join('\u0000');
      if (inner !== null && typeof inner === 'object' && !Array.isArray(inner)) {
        const out: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(inner)) out[k] = decodeNul(v);
        return out;
      }
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = decodeNul(v);
    return out;
  }
  return value;
}

const isMarked = (value: object): boolean => {
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0] === MARK;
};
