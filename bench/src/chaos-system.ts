/**
 * `npm run chaos` (or `robustrl chaos`) — the whole-system chaos campaign (issue 14): every part of
 * robustrl as its own process on a broker and PostgreSQL server of the run's own, the reference job of
 * clients/python (two trainer ranks, four rollout engines behind the router) running tens of steps, and
 * a seeded schedule of faults: kill -9 of role processes, of agents (machine loss), of every
 * control-plane service (the controller in the middle of a recovery included), a broker restart and a
 * PostgreSQL restart. Prints a scorecard per seed (markdown on stdout, progress on stderr) and exits 1
 * if any invariant is violated.
 *
 *   node bench/dist/chaos-system.js [--seeds 1,2,3] [--faults N] [--steps N] [--deadline S] [--mix kind=w,...] [--keep]
 */
import { FAULT_KINDS, parseFaultMix } from './chaos/fault-schedule';
import { DEFAULT_SYSTEM_CHAOS, formatSystemScorecard, runSystemChaos, SystemScorecard } from './chaos/system-chaos';

const USAGE = `usage: node bench/dist/chaos-system.js [options]
  --seeds 1,2,3     seeds, one campaign each, one after the other (CHAOS_SEEDS; default 1,2,3)
  --faults N        faults per campaign (CHAOS_FAULTS; default ${DEFAULT_SYSTEM_CHAOS.faults})
  --steps N         training steps of the reference job (CHAOS_STEPS; default ${DEFAULT_SYSTEM_CHAOS.steps})
  --deadline S      seconds one campaign may take in all (CHAOS_DEADLINE_SECONDS; default ${DEFAULT_SYSTEM_CHAOS.deadlineSeconds})
  --mix k=w,...     fault weights (CHAOS_MIX), kinds: ${FAULT_KINDS.join(', ')}
  --keep            keep each run's folder: servers' data and every process's log (CHAOS_KEEP=1)`;

function parse(argv: string[], env: NodeJS.ProcessEnv) {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    if (a === '--keep') {
      flags.set('keep', '1');
      continue;
    }
    const m = /^--(seeds|faults|steps|deadline|mix)(?:=(.*))?$/.exec(a);
    if (!m) throw new Error(`unknown argument '${a}'\n${USAGE}`);
    const value = m[2] ?? argv[++i];
    if (value === undefined) throw new Error(`--${m[1]} needs a value`);
    flags.set(m[1], value);
  }
  const integer = (name: string, envName: string, fallback: number, min: number) => {
    const raw = flags.get(name) ?? env[envName];
    if (raw === undefined || raw === '') return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} (or ${envName}) must be an integer >= ${min}, got '${raw}'`);
    return n;
  };
  const seedsText = flags.get('seeds') ?? env.CHAOS_SEEDS ?? '1,2,3';
  const seeds = seedsText.split(',').map((s) => Number(s.trim()));
  if (seeds.length === 0 || seeds.some((s) => !Number.isInteger(s))) throw new Error(`--seeds must be integers separated by commas, got '${seedsText}'`);
  return {
    seeds,
    faults: integer('faults', 'CHAOS_FAULTS', DEFAULT_SYSTEM_CHAOS.faults, 0),
    steps: integer('steps', 'CHAOS_STEPS', DEFAULT_SYSTEM_CHAOS.steps, 3),
    deadlineSeconds: integer('deadline', 'CHAOS_DEADLINE_SECONDS', DEFAULT_SYSTEM_CHAOS.deadlineSeconds, 60),
    weights: parseFaultMix(flags.get('mix') ?? env.CHAOS_MIX ?? ''),
    keep: flags.has('keep') || env.CHAOS_KEEP === '1',
  };
}

async function main(): Promise<void> {
  const o = parse(process.argv.slice(2), process.env);
  const cards: SystemScorecard[] = [];
  for (const seed of o.seeds) {
    process.stderr.write(`[chaos] seed ${seed}: ${o.faults} faults, ${o.steps} steps\n`);
    const card = await runSystemChaos({ ...o, seed, progress: (line) => process.stderr.write(`[chaos seed ${seed}] ${line}\n`) });
    cards.push(card);
    process.stdout.write(`${formatSystemScorecard(card)}\n\n`);
  }
  const failed = cards.filter((c) => !c.ok).map((c) => c.seed);
  process.stdout.write(
    failed.length === 0 ? `all invariants held for seeds ${o.seeds.join(', ')}\n` : `INVARIANTS VIOLATED for seed(s) ${failed.join(', ')}\n`,
  );
  process.exitCode = failed.length === 0 ? 0 : 1;
}

main().catch((err: unknown) => {
  process.stderr.write(`chaos failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
