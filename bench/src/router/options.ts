import { Target, TARGETS } from './targets';
import { Workload, WORKLOADS } from './workloads';

/** One column of the tables: streamed or not, at a concurrency. */
export interface Level {
  stream: boolean;
  concurrency: number;
}

export interface Options {
  seconds: number;
  warmupSeconds: number;
  levels: Level[];
  targets: Target[];
  workloads: Workload[];
  /** Turns of a multi-turn trajectory. */
  turns: number;
  /** Where to write the results as JSON (else CHAOS_SCORECARD_JSON, when set). */
  json: string | null;
  /** Every target run this many times, round after round (rounds.ts); the report gives medians. */
  rounds: number;
}

export const USAGE = `usage: node bench/dist/router/router.bench.js [--seconds S] [--warmup-seconds W] [--levels L] [--targets T] [--workloads K] [--turns N] [--rounds N] [--json FILE]
  --seconds S          timed window of each level (default 15)
  --warmup-seconds W   warm-up before it (default 3)
  --levels L           comma-separated, s<N> streamed or n<N> not streamed at concurrency N (default s1,s64,s256,n64)
  --targets T          comma-separated, of: ${TARGETS.map((t) => t.name).join(', ')} (default all)
  --workloads K        comma-separated, of: ${WORKLOADS.join(', ')} (default both)
  --turns N            turns of a multi-turn trajectory (default 4)
  --rounds N           run every target N times, round after round; medians and per-round ratios (default 1)
  --json FILE          write the results there as JSON`;

export function levelName(l: Level): string {
  return `${l.stream ? 'streamed' : 'not streamed'}, ${l.concurrency}`;
}

function list(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function number(name: string, value: string, min: number, integer: boolean): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n)))
    throw new Error(`--${name} must be ${integer ? 'an integer' : 'a number'} >= ${min}, got '${value}'`);
  return n;
}

function levels(value: string): Level[] {
  return list(value).map((item) => {
    const m = /^([sn])(\d+)$/.exec(item);
    if (!m || Number(m[2]) < 1) throw new Error(`--levels: '${item}' is not s<N> (streamed) or n<N> (not streamed), N >= 1`);
    return { stream: m[1] === 's', concurrency: Number(m[2]) };
  });
}

function targets(value: string): Target[] {
  const names = list(value);
  for (const n of names)
    if (!TARGETS.some((t) => t.name === n)) throw new Error(`--targets: unknown target '${n}' (known: ${TARGETS.map((t) => t.name).join(', ')})`);
  // In the registry's order, whatever order they were named in: the tables read the same every run.
  return TARGETS.filter((t) => names.includes(t.name));
}

function workloads(value: string): Workload[] {
  const names = list(value);
  for (const n of names)
    if (!(WORKLOADS as readonly string[]).includes(n)) throw new Error(`--workloads: unknown workload '${n}' (known: ${WORKLOADS.join(', ')})`);
  return WORKLOADS.filter((w) => names.includes(w));
}

/** The command line's options; `--help` prints the usage and exits. */
export function parseOptions(argv: readonly string[]): Options {
  const out: Options = {
    seconds: 15,
    warmupSeconds: 3,
    levels: levels('s1,s64,s256,n64'),
    targets: [...TARGETS],
    workloads: [...WORKLOADS],
    turns: 4,
    json: null,
    rounds: 1,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!m) throw new Error(`unexpected argument '${arg}'\n${USAGE}`);
    const value = m[2] ?? argv[++i];
    if (value === undefined) throw new Error(`--${m[1]} needs a value`);
    switch (m[1]) {
      case 'seconds':
        out.seconds = number('seconds', value, 0.1, false);
        break;
      case 'warmup-seconds':
        out.warmupSeconds = number('warmup-seconds', value, 0, false);
        break;
      case 'levels':
        out.levels = levels(value);
        break;
      case 'targets':
        out.targets = targets(value);
        break;
      case 'workloads':
        out.workloads = workloads(value);
        break;
      case 'turns':
        out.turns = number('turns', value, 2, true);
        break;
      case 'json':
        out.json = value;
        break;
      case 'rounds':
        out.rounds = number('rounds', value, 1, true);
        break;
      default:
        throw new Error(`unknown option '--${m[1]}'\n${USAGE}`);
    }
  }
  if (out.levels.length === 0 || out.targets.length === 0 || out.workloads.length === 0)
    throw new Error('--levels, --targets and --workloads need at least one each');
  return out;
}
