import type { z } from 'zod';

/**
 * A quick yes for well-formed messages, compiled from their zod schema: `true` only for a value zod
 * would accept *and return unchanged* (the same keys, in the same order, the same values), so the
 * value itself can stand for zod's output. Anything else answers `false`, and the caller asks zod,
 * which decides and explains — a `false` is never a rejection.
 *
 * Why: zod's parse is about half of reading a telemetry sample (it validates and then builds a copy
 * of every object), and the detector reads tens of thousands a second (`bench:ingest`).
 *
 * What it covers is what the catalog's schemas use: objects without catchall (unknown keys, or keys
 * out of the schema's order, answer `false`: zod would strip or reorder them), strings with length
 * checks and patterns (the schema's own regular expressions: `z.uuid()`, `z.iso.datetime()`,
 * `.regex()`), finite numbers with bounds and `z.int()`, literals, enums, nullable, optional, arrays
 * with length checks, unknown. A schema using anything else (unions, records, transforms, defaults,
 * refinements, checks it does not know) compiles to null: no quick path, zod alone, as before.
 * `exact-check.spec.ts` holds it to zod over every catalog type and many near-miss values.
 */
export type ExactCheck = (value: unknown) => boolean;

/** The compiled check of `schema`, or null when it uses something this does not replicate. */
export function compileExactCheck(schema: z.ZodType): ExactCheck | null {
  try {
    return compile(schema as unknown as Introspected);
  } catch {
    return null; // a def this version of zod lays out differently: no quick path
  }
}

/** The part of zod 4's `_zod.def` this reads (the introspection surface zod documents for tools). */
interface Introspected {
  _zod: { def: Def };
}
interface Def {
  type: string;
  checks?: Introspected[];
  check?: string;
  format?: string;
  pattern?: RegExp;
  minimum?: number;
  maximum?: number;
  value?: number;
  inclusive?: boolean;
  values?: unknown[];
  entries?: Record<string, unknown>;
  innerType?: Introspected;
  element?: Introspected;
  shape?: Record<string, Introspected>;
  catchall?: Introspected;
}

const UNSUPPORTED = null;
const PATTERN_ONLY_FORMATS = new Set(['uuid', 'guid', 'datetime', 'regex']);

function compile(schema: Introspected): ExactCheck | null {
  const def = schema._zod.def;
  const own = ownCheck(def);
  if (own === UNSUPPORTED) return UNSUPPORTED;
  const checks: ExactCheck[] = [];
  for (const c of def.checks ?? []) {
    const check = refinement(c._zod.def);
    if (!check) return UNSUPPORTED;
    checks.push(check);
  }
  if (own) checks.unshift(own);
  const base = typeCheck(def);
  if (!base) return UNSUPPORTED;
  if (checks.length === 0) return base;
  return (v) => {
    if (!base(v)) return false;
    for (const c of checks) if (!c(v)) return false;
    return true;
  };
}

/** The check a schema carries as itself (`z.uuid()` is a string with a format; `z.int()` a number with one); undefined: none. */
function ownCheck(def: Def): ExactCheck | undefined | null {
  if (!def.check) return undefined;
  if (def.type === 'string' || def.type === 'number') return refinement(def);
  return UNSUPPORTED;
}

/** One of a schema's checks, or null for one this does not replicate. */
function refinement(def: Def): ExactCheck | null {
  switch (def.check) {
    case 'min_length': {
      const min = def.minimum!;
      return (v) => (v as string | unknown[]).length >= min;
    }
    case 'max_length': {
      const max = def.maximum!;
      return (v) => (v as string | unknown[]).length <= max;
    }
    case 'greater_than': {
      const bound = def.value!;
      return def.inclusive ? (v) => (v as number) >= bound : (v) => (v as number) > bound;
    }
    case 'less_than': {
      const bound = def.value!;
      return def.inclusive ? (v) => (v as number) <= bound : (v) => (v as number) < bound;
    }
    case 'string_format': {
      // Formats that are their pattern alone in zod 4 (others, like url or base64, check more than it).
      const pattern = def.pattern;
      if (!PATTERN_ONLY_FORMATS.has(def.format ?? '') || !(pattern instanceof RegExp) || pattern.global || pattern.sticky) return null;
      return (v) => pattern.test(v as string);
    }
    case 'number_format':
      return def.format === 'safeint' ? (v) => Number.isSafeInteger(v) : null;
    default:
      return null;
  }
}

/** The schema's type itself (without its checks), or null for a type this does not replicate. */
function typeCheck(def: Def): ExactCheck | null {
  switch (def.type) {
    case 'string':
      return (v) => typeof v === 'string';
    case 'number':
      return (v) => typeof v === 'number' && Number.isFinite(v);
    case 'unknown':
      return () => true;
    case 'literal': {
      const values = def.values!;
      return (v) => values.includes(v);
    }
    case 'enum': {
      const values = new Set(Object.values(def.entries!));
      return (v) => values.has(v as never);
    }
    case 'nullable': {
      const inner = compile(def.innerType!);
      return inner && ((v) => v === null || inner(v));
    }
    case 'array': {
      const element = compile(def.element!);
      return (
        element &&
        ((v) => {
          if (!Array.isArray(v)) return false;
          for (const e of v) if (!element(e)) return false;
          return true;
        })
      );
    }
    case 'object':
      return def.catchall ? null : objectCheck(def.shape!);
    default:
      return null;
  }
}

/** An object whose own keys are some of the shape's, in the shape's order, each valid; every required one present. */
function objectCheck(shape: Record<string, Introspected>): ExactCheck | null {
  const fields: Array<{ key: string; optional: boolean; check: ExactCheck }> = [];
  for (const [key, schema] of Object.entries(shape)) {
    const optional = schema._zod.def.type === 'optional';
    if (optional && (schema._zod.def.checks?.length ?? 0) > 0) return null;
    const check = compile(optional ? schema._zod.def.innerType! : schema);
    if (!check) return null;
    fields.push({ key, optional, check });
  }
  return (v) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
    const keys = Object.keys(v);
    let k = 0;
    for (const f of fields) {
      if (keys[k] !== f.key) {
        if (f.optional) continue;
        return false; // missing, or out of the schema's order
      }
      const value = (v as Record<string, unknown>)[f.key];
      if (value === undefined) return false; // zod would drop an optional key holding undefined
      if (!f.check(value)) return false;
      k++;
    }
    return k === keys.length; // a key the schema does not know (zod strips it)
  };
}
