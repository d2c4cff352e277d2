import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';

const REPO_ROOT = resolve(__dirname, '..', '..');

/**
 * A connection setting (KAFKA_BROKERS, DATABASE_URL) from the environment, or else start the local
 * services (idempotent) and take it from what `deploy/local/services.sh env` prints.
 */
export function localServiceSetting(name: 'KAFKA_BROKERS' | 'DATABASE_URL', progress: (line: string) => void): string {
  const given = process.env[name];
  if (given) return given;
  const script = resolve(REPO_ROOT, 'deploy/local/services.sh');
  progress(`${name} is unset: starting local services (bash ${script} up)`);
  let value: string | undefined;
  try {
    execFileSync('bash', [script, 'up'], { stdio: ['ignore', 2, 2] });
    const env = execFileSync('bash', [script, 'env'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 2] });
    value = new RegExp(`^${name}=(.*)$`, 'm').exec(env)?.[1]?.trim();
  } catch (err) {
    throw new Error(`could not start the local services with ${script}: ${(err as Error).message}`);
  }
  if (!value) throw new Error(`${script} env printed no ${name} line`);
  return value;
}

/** An integer option: `--name N` / `--name=N` on the command line, else `env`, else the default. */
export interface IntegerOption {
  env: string;
  fallback: number;
  min: number;
  /** Placeholder in the usage line, e.g. `N`. */
  placeholder: string;
}

/**
 * Parse a benchmark's integer options; `--help` prints the usage and exits. An unknown argument or a
 * bad value stops the run with a message naming it.
 */
export function parseIntegerOptions<K extends string>(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  script: string,
  spec: Record<K, IntegerOption>,
): Record<K, number> {
  const names = Object.keys(spec) as K[];
  const usage = names.map((n) => `--${n} ${spec[n].placeholder}`).join(', ');
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') {
      process.stdout.write(`usage: node ${script} ${names.map((n) => `[--${n} ${spec[n].placeholder}]`).join(' ')}\n`);
      process.exit(0);
    }
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!m || !(names as string[]).includes(m[1])) throw new Error(`unknown argument '${arg}' (expected ${usage})`);
    const value = m[2] ?? argv[++i];
    if (value === undefined) throw new Error(`--${m[1]} needs a value`);
    flags.set(m[1], value);
  }
  const out = {} as Record<K, number>;
  for (const name of names) {
    const { env: envName, fallback, min } = spec[name];
    const raw = flags.get(name) ?? env[envName];
    if (raw === undefined || raw === '') {
      out[name] = fallback;
      continue;
    }
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} (or ${envName}) must be an integer >= ${min}, got '${raw}'`);
    out[name] = n;
  }
  return out;
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Nearest-rank percentile (p in 0..100) of values in any order. */
export function percentile(xs: ArrayLike<number>, p: number): number {
  const s = Array.from(xs).sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/**
 * Ends a long command once its work is done: stdout flushed, then exit with `code`, whatever still holds
 * the event loop (a client's retry timer, a file watch) — a finished campaign must not sit there. What
 * was still open is named on stderr, so a leak is seen rather than waited on.
 */
export function exitWhenDone(name: string, code: number): void {
  const open = process
    .getActiveResourcesInfo()
    .filter((r) => r !== 'TTYWrap' && r !== 'PipeWrap')
    .reduce((counts, r) => counts.set(r, (counts.get(r) ?? 0) + 1), new Map<string, number>());
  if (open.size > 0) process.stderr.write(`[${name}] done; still open at exit: ${[...open].map(([r, n]) => `${r} ×${n}`).join(', ')}\n`);
  process.stdout.write('', () => process.exit(code));
}

/** Writes a run's result as JSON where `CHAOS_SCORECARD_JSON` names a file (what a test reads of a campaign run as a command). */
export function writeScorecardJson(result: unknown): void {
  const file = process.env.CHAOS_SCORECARD_JSON;
  if (file) writeFileSync(file, JSON.stringify(result, null, 1));
}
