import { z } from 'zod';
import { prng } from '@robustrl/testing/seeded-random';
import { decodeMessage, MESSAGE_TYPES, MessageCatalog, validateMessage } from './catalog';
import { compileExactCheck } from './exact-check';

/**
 * The quick check may say yes only where zod says yes and returns the value unchanged. Held to zod
 * itself: random well-formed messages of every catalog type (built from the schemas), and for each,
 * near misses at every field — removed, replaced by values on and past the schema's bounds, an
 * unknown key added, keys reordered.
 */
type Def = { type: string; checks?: Array<{ _zod: { def: Def } }>; check?: string; format?: string; pattern?: RegExp } & Record<string, unknown>;
const defOf = (schema: unknown): Def => (schema as { _zod: { def: Def } })._zod.def;

/** A random value the schema accepts (asserted below), its object keys in the schema's order. */
function arbitrary(schema: unknown, random: () => number): unknown {
  const def = defOf(schema);
  const checks = [def, ...(def.checks ?? []).map((c) => c._zod.def)];
  const bound = (name: string) =>
    checks.find((c) => c.check === name) as (Def & { value?: number; inclusive?: boolean; minimum?: number; maximum?: number }) | undefined;
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)];
  switch (def.type) {
    case 'string': {
      const format = checks.find((c) => c.check === 'string_format');
      if (format?.format === 'uuid' || format?.format === 'guid') {
        const hex = (n: number) => Array.from({ length: n }, () => pick([...'0123456789abcdef'])).join('');
        return `${hex(8)}-${hex(4)}-4${hex(3)}-${pick(['8', '9', 'a', 'b'])}${hex(3)}-${hex(12)}`;
      }
      if (format?.format === 'datetime') return new Date(Date.UTC(2026, 0, 1) + Math.floor(random() * 3e10)).toISOString();
      if (format?.format === 'regex') return `00-${'ab'.repeat(16)}-${'cd'.repeat(8)}-01`; // the one pattern the catalog uses: traceparent
      const min = bound('min_length')?.minimum ?? 0;
      const max = bound('max_length')?.maximum ?? min + 12;
      return 'm'.repeat(min + Math.floor(random() * (Math.min(max, min + 12) - min + 1)));
    }
    case 'number': {
      const int = checks.some((c) => c.check === 'number_format');
      const lower = bound('greater_than');
      const upper = bound('less_than');
      let lo = lower ? lower.value! + (lower.inclusive ? 0 : int ? 1 : 1e-3) : -50;
      let hi = upper ? upper.value! - (upper.inclusive ? 0 : int ? 1 : 1e-3) : lo + 100;
      if (hi < lo) [lo, hi] = [hi, lo];
      const x = lo + random() * (hi - lo);
      return int ? Math.min(Math.floor(hi), Math.max(Math.ceil(lo), Math.round(x))) : x;
    }
    case 'boolean':
      return random() < 0.5;
    case 'literal':
      return (def.values as unknown[])[0];
    case 'enum':
      return pick(Object.values(def.entries as Record<string, unknown>));
    case 'nullable':
      return random() < 0.3 ? null : arbitrary(def.innerType, random);
    case 'optional':
      return arbitrary(def.innerType, random);
    case 'default':
      return arbitrary(def.innerType, random);
    case 'array': {
      const min = bound('min_length')?.minimum ?? 0;
      return Array.from({ length: min + Math.floor(random() * 3) }, () => arbitrary(def.element, random));
    }
    case 'record':
      return { k: arbitrary(def.valueType, random) };
    case 'union':
      return arbitrary(pick(def.options as unknown[]), random);
    case 'unknown':
      return { anything: [1, 'two'] };
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [key, field] of Object.entries(def.shape as Record<string, unknown>)) {
        if (defOf(field).type === 'optional' && random() < 0.4) continue;
        out[key] = arbitrary(field, random);
      }
      return out;
    }
    default:
      throw new Error(`the spec cannot build a ${def.type}: teach arbitrary() about it`);
  }
}

/** Values on and past the bounds the catalog's schemas use, and of every other JSON kind. */
const NEAR_MISSES: unknown[] = [
  null,
  '',
  'x',
  'x'.repeat(200),
  'x'.repeat(201),
  -1,
  0,
  -0,
  0.5,
  1,
  1.5,
  2,
  2 ** 53,
  1e300,
  true,
  [],
  [0.5, 2],
  {},
  '2026-02-29T00:00:00Z',
  '2028-02-29T00:00:00.000Z',
  '2026-11-23T15:00:00+01:00',
  '2026-11-23 15:00:00Z',
  'dcgm',
  'event',
  'command',
  '00000000-0000-0000-0000-000000000000',
  '0a5052b4-2be2-46d1-81c4-5ef58e599db9',
  '0a5052b4-2be2-46d1-81c4-5ef58e599db', // one short
  '00-' + 'ab'.repeat(16) + '-' + 'cd'.repeat(8) + '-01',
];

/** Every variant of `value` with one change somewhere inside it. */
function* nearMisses(value: unknown): Generator<unknown> {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) for (const v of nearMisses(value[i])) yield value.map((x, j) => (j === i ? v : x));
    yield [...value, value[0] ?? 'extra'];
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  const entries = Object.entries(value);
  yield Object.fromEntries(entries.reverse());
  yield { ...value, unknownKey: 1 };
  for (const [key, inner] of Object.entries(value)) {
    const without = Object.fromEntries(Object.entries(value).filter(([k]) => k !== key));
    yield without;
    const at = (v: unknown) => Object.fromEntries(Object.entries(value).map(([k, x]) => [k, k === key ? v : x]));
    for (const v of NEAR_MISSES) yield at(v);
    for (const v of nearMisses(inner)) yield at(v);
  }
}

describe('compileExactCheck: a quick yes only where zod says yes and returns the value unchanged', () => {
  const seeds = [1, 2, 3];
  const tally = { quickYes: 0, quickNoZodYes: 0, bothNo: 0, compiled: [] as string[] };

  it.each(MESSAGE_TYPES)('%s: never yes where zod says no or would change the value', (type) => {
    const schema = MessageCatalog[type].schema;
    const check = compileExactCheck(schema);
    if (!check) return; // no quick path for this type: zod alone (counted below)
    tally.compiled.push(type);
    for (const seed of seeds) {
      const random = prng(seed * 7919 + type.length);
      for (let n = 0; n < 4; n++) {
        const valid = arbitrary(schema, random);
        const parsed = schema.safeParse(valid);
        expect(parsed.success ? 'accepted' : z.prettifyError(parsed.error!)).toBe('accepted'); // the generator builds valid messages
        expect(check(valid)).toBe(true); // in the schema's key order: the quick path takes it
        for (const variant of nearMisses(valid)) {
          const zod = schema.safeParse(variant);
          if (check(variant)) {
            tally.quickYes += 1;
            expect(zod.success).toBe(true);
            expect(JSON.stringify(zod.data)).toBe(JSON.stringify(variant));
          } else if (zod.success) tally.quickNoZodYes += 1;
          else tally.bothNo += 1;
        }
      }
    }
  });

  it('covers the high-volume samples, and the spec saw every kind of answer', () => {
    expect(tally.compiled).toEqual(expect.arrayContaining(['GpuActivitySampled', 'RolloutThroughputSampled', 'HeartbeatAcked', 'AgentFaultSignalled']));
    // Not vacuous: near misses the quick path took, ones it left to zod (reordered keys), ones both refused.
    expect(tally.quickYes).toBeGreaterThan(100);
    expect(tally.quickNoZodYes).toBeGreaterThan(10);
    expect(tally.bothNo).toBeGreaterThan(1000);
  });

  it('compiles to null where it does not replicate zod (no quick path, zod alone)', () => {
    expect(compileExactCheck(z.union([z.string(), z.number()]))).toBeNull();
    expect(compileExactCheck(z.object({ a: z.string() }).catchall(z.number()))).toBeNull();
    expect(compileExactCheck(z.object({ a: z.string().transform((s) => s.length) }))).toBeNull();
    expect(compileExactCheck(z.object({ a: z.string().refine((s) => s !== 'no') }))).toBeNull();
    expect(compileExactCheck(z.object({ a: z.url() }))).toBeNull();
    expect(compileExactCheck(z.object({ a: z.record(z.string(), z.number()) }))).toBeNull();
    expect(compileExactCheck(z.object({ a: z.number().default(1) }))).toBeNull();
    expect(compileExactCheck(z.object({ a: z.number().multipleOf(2) }))).toBeNull();
  });

  it('validateMessage hands back the record itself when the quick path takes it, zod’s copy otherwise, and zod’s reasons', () => {
    const random = prng(42);
    const sample = arbitrary(MessageCatalog.GpuActivitySampled.schema, random) as Record<string, unknown>;
    const quick = validateMessage(sample);
    expect(quick.ok && quick.message).toBe(sample);
    const reordered = Object.fromEntries(Object.entries(sample).reverse());
    const slow = validateMessage(reordered);
    expect(slow.ok).toBe(true);
    expect(slow.ok && slow.message).not.toBe(reordered);
    expect(JSON.stringify(slow.ok && slow.message)).toBe(JSON.stringify(sample));
    const bad = decodeMessage(Buffer.from(JSON.stringify({ ...sample, data: { ...(sample.data as object), tensorActive: 1.5 } })));
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.reason).toMatch(/invalid GpuActivitySampled: .*tensorActive/s);
  });
});
