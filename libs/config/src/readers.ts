import { readFileSync } from 'node:fs';
import { ConfigError, register, SettingInfo } from './registry';

/** The environment a reader reads: `process.env`, or a test's own. */
export type Env = Readonly<Record<string, string | undefined>>;

/** One variable's reader: defined once (which registers it), read where the owner starts. */
export interface Setting<T> {
  readonly info: SettingInfo;
  /** The value, the default when unset or empty; a value of the wrong form throws ConfigError. */
  read(env?: Env): T;
}

/** What every reader is told: who reads the variable, what it means, and (where not derived) how to show its default. */
export interface Described<D> {
  owner: string;
  meaning: string;
  /** Unset or empty: this. `undefined`: the variable is optional and reads as undefined. */
  default: D;
  /** The default as the reference shows it, where the value alone would not say it (`the host name`). */
  defaultText?: string;
}

const shown = (d: unknown, text?: string) => text ?? (d === undefined ? 'none' : d === null ? 'off' : String(d));

/** A reader from a parser: `parse` returns the value, or undefined for a value not of the form `accepted`. */
export function custom<T, D>(name: string, o: Described<D> & { accepted: string; parse: (raw: string) => T | undefined }): Setting<T | D> {
  const info: SettingInfo = { name, owner: o.owner, meaning: o.meaning, accepted: o.accepted, defaultText: shown(o.default, o.defaultText) };
  register(info);
  return {
    info,
    read(env: Env = process.env) {
      const raw = env[name]?.trim();
      if (raw === undefined || raw === '') return o.default;
      const value = o.parse(raw);
      if (value === undefined) throw new ConfigError(name, o.accepted, raw);
      return value;
    },
  };
}

const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const toNumber = (raw: string) => (NUMBER.test(raw) ? Number(raw) : undefined);

/** Seconds, a number: `> 0` unless `zero` says what 0 means (then `≥ 0`). Read as seconds. */
export function seconds<D extends number | undefined>(name: string, o: Described<D> & { zero?: string }): Setting<number | D> {
  const accepted = o.zero ? `a number of seconds ≥ 0 (0: ${o.zero})` : 'a positive number of seconds';
  return custom(name, { ...o, accepted, parse: (raw) => within(toNumber(raw), o.zero ? 0 : null, o.zero ? null : 0) });
}

/** Seconds, or `off` (read as null): a timer that can be turned off. */
export function secondsOrOff<D extends number | null>(name: string, o: Described<D>): Setting<number | null | D> {
  return custom(name, {
    ...o,
    accepted: "a positive number of seconds or 'off'",
    parse: (raw) => (raw === 'off' ? null : within(toNumber(raw), null, 0)),
  });
}

/** A whole number within `min`..`max` (each optional). */
export function int<D extends number | undefined>(name: string, o: Described<D> & { min?: number; max?: number }): Setting<number | D> {
  const range =
    o.min !== undefined && o.max !== undefined ? ` from ${o.min} to ${o.max}` : o.min !== undefined ? ` ≥ ${o.min}` : o.max !== undefined ? ` ≤ ${o.max}` : '';
  return custom(name, {
    ...o,
    accepted: `a whole number${range}`,
    parse: (raw) => {
      const n = within(toNumber(raw), o.min ?? null, null);
      return n !== undefined && Number.isInteger(n) && (o.max === undefined || n <= o.max) ? n : undefined;
    },
  });
}

/** A number `≥ min` (or `> above`). */
export function number<D extends number | undefined>(name: string, o: Described<D> & { min?: number; above?: number }): Setting<number | D> {
  const accepted = o.above !== undefined ? `a number > ${o.above}` : o.min !== undefined ? `a number ≥ ${o.min}` : 'a number';
  return custom(name, { ...o, accepted, parse: (raw) => within(toNumber(raw), o.min ?? null, o.above ?? null) });
}

/** `on` or `off`. */
export function onOff(name: string, o: Described<boolean>): Setting<boolean> {
  return custom(name, {
    ...o,
    defaultText: o.defaultText ?? (o.default ? 'on' : 'off'),
    accepted: 'on or off',
    parse: (raw) => (raw === 'on' ? true : raw === 'off' ? false : undefined),
  });
}

/** One of the given words. */
export function oneOf<const V extends string, D extends V | undefined>(name: string, values: readonly V[], o: Described<D>): Setting<V | D> {
  const accepted = values.length === 2 ? `${values[0]} or ${values[1]}` : `one of ${values.join(', ')}`;
  return custom(name, { ...o, accepted, parse: (raw) => ((values as readonly string[]).includes(raw) ? (raw as V) : undefined) });
}

/** An absolute URL of one of `protocols` (default http and https). */
export function url<D extends string | undefined>(name: string, o: Described<D> & { protocols?: readonly string[] }): Setting<string | D> {
  const protocols = o.protocols ?? ['http', 'https'];
  return custom(name, {
    ...o,
    accepted: `a URL, ${protocols.map((p) => `${p}://…`).join(' or ')}`,
    parse: (raw) => {
      try {
        return protocols.includes(new URL(raw).protocol.replace(/:$/, '')) ? raw : undefined;
      } catch {
        return undefined;
      }
    },
  });
}

/** Free text, checked against `pattern` when given (`accepted` then says the form). */
export function text<D extends string | undefined>(name: string, o: Described<D> & { pattern?: RegExp; accepted?: string }): Setting<string | D> {
  return custom(name, { ...o, accepted: o.accepted ?? 'text', parse: (raw) => (o.pattern && !o.pattern.test(raw) ? undefined : raw) });
}

/**
 * A secret given as the value itself or, with `_FILE`, as the path of a file holding it (a mounted
 * secret), the file's content trimmed; `accepted` says the value's form where its caller checks one. Both
 * variables are registered. When both are set the value wins, unless `both` says the file wins or that
 * both set is refused (`<NAME> and <NAME>_FILE are both set`); an empty file reads as unset unless
 * `emptyFile` refuses it (`<NAME>_FILE: <path> is empty`).
 */
export function fileOrValue(
  name: string,
  o: Omit<Described<undefined>, 'default'> & { accepted?: string; both?: 'value wins' | 'file wins' | 'refused'; emptyFile?: 'unset' | 'refused' },
): Setting<string | undefined> {
  const fileName = `${name}_FILE`;
  const both = o.both ?? 'value wins';
  const whenBoth = both === 'file wins' ? `; it wins over \`${name}\`` : both === 'refused' ? `; not with \`${name}\` too` : '';
  register({
    name: fileName,
    owner: o.owner,
    meaning: `a file holding \`${name}\`'s value (a mounted secret)${whenBoth}`,
    accepted: o.emptyFile === 'refused' ? 'a readable, non-empty file' : 'a readable file',
    defaultText: 'none',
  });
  const value = text(name, { owner: o.owner, meaning: o.meaning, defaultText: o.defaultText, accepted: o.accepted, default: undefined });
  const fromFile = (path: string): string | undefined => {
    let content: string;
    try {
      content = readFileSync(path, 'utf8').trim();
    } catch (err) {
      throw new Error(`${fileName}: cannot read ${path}: ${(err as Error).message}`);
    }
    if (!content && o.emptyFile === 'refused') throw new Error(`${fileName}: ${path} is empty`);
    return content || undefined;
  };
  return {
    info: value.info,
    read(env: Env = process.env) {
      const given = value.read(env);
      const path = env[fileName]?.trim() || undefined;
      if (given !== undefined && path !== undefined) {
        if (both === 'refused') throw new Error(`${name} and ${fileName} are both set: give one`);
        if (both === 'value wins') return given;
      }
      return path === undefined ? given : fromFile(path);
    },
  };
}

function within(n: number | undefined, min: number | null, above: number | null): number | undefined {
  if (n === undefined || !Number.isFinite(n)) return undefined;
  if (min !== null && n < min) return undefined;
  if (above !== null && n <= above) return undefined;
  return n;
}
