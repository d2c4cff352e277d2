import type { Decider, StateCodec } from './decider';

/**
 * The default snapshot codec: JSON, with `Map` and `Set` written as tagged arrays so a state built
 * on them reads back as it was. Plain objects, arrays, strings, finite numbers, booleans and null
 * round-trip; `undefined` object members are dropped (as JSON does); anything else (a class instance,
 * a function, a non-finite number) is refused with the path to it, so a state that would not survive
 * a restart is found when the first snapshot is written, not when the restart needs it.
 */
export const JSON_STATE_CODEC: StateCodec<unknown> = {
  encode: (state) => encodeValue(state, '$'),
  decode: (data) => decodeValue(data),
};

/** The codec a decider's snapshots use: its own, else the default. */
export function codecOf<State>(decider: Pick<Decider<State, never, never, never>, 'snapshotCodec'>): StateCodec<State> {
  return decider.snapshotCodec ?? (JSON_STATE_CODEC as StateCodec<State>);
}

const MAP_TAG = '$map';
const SET_TAG = '$set';

function encodeValue(value: unknown, path: string): unknown {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`state at ${path} is ${value}: a snapshot holds finite numbers only`);
    return value;
  }
  if (Array.isArray(value)) return value.map((v, i) => encodeValue(v, `${path}[${i}]`));
  if (value instanceof Map)
    return { [MAP_TAG]: [...value].map(([k, v], i) => [encodeValue(k, `${path}<key ${i}>`), encodeValue(v, `${path}.get(${String(k)})`)]) };
  if (value instanceof Set) return { [SET_TAG]: [...value].map((v, i) => encodeValue(v, `${path}<member ${i}>`)) };
  if (typeof value === 'object' && isPlain(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = encodeValue(v, `${path}.${k}`);
    return out;
  }
  const kind = typeof value === 'object' ? (value.constructor?.name ?? 'object') : typeof value;
  throw new Error(`state at ${path} is a ${kind}: give the decider a snapshotCodec that writes it as data`);
}

function decodeValue(data: unknown): unknown {
  if (data === null || typeof data !== 'object') return data;
  if (Array.isArray(data)) return data.map(decodeValue);
  const record = data as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length === 1 && keys[0] === MAP_TAG && Array.isArray(record[MAP_TAG]))
    return new Map((record[MAP_TAG] as [unknown, unknown][]).map(([k, v]) => [decodeValue(k), decodeValue(v)]));
  if (keys.length === 1 && keys[0] === SET_TAG && Array.isArray(record[SET_TAG])) return new Set((record[SET_TAG] as unknown[]).map(decodeValue));
  const out: Record<string, unknown> = {};
  for (const k of keys) out[k] = decodeValue(record[k]);
  return out;
}

function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
