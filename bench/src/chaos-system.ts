/**
 * `npm run chaos` (or `robustrl chaos`) — the whole-system chaos campaign: every part of robustrl as its
 * own process on a broker and PostgreSQL server of the run's own, a job running tens of steps — the
 * reference stand-in of clients/python (default, fast) or the real GRPO job (`--job grpo`: PyTorch
 * training, vLLM engines) — and a seeded schedule of faults: kill -9 of role processes, of agents
 * (machine loss), of every control-plane service (the controller in the middle of a recovery
 * included), a broker restart and a PostgreSQL restart, and for the GRPO job an engine killed during
 * its weight load and a rank killed as it writes its checkpoint; faults as clusters have them (a rack, a
 * second trainer fault in a step, a machine failing on every restart, machines lost inside a recovery)
 * and faults drawn on top of the previous one. Prints a scorecard per seed (markdown
 * on stdout, progress on stderr) and exits 1 if any invariant is violated.
 *
 *   node bench/dist/chaos-system.js [--job reference|grpo] [--hosts shared|netns] [--policy role-based|task-restart]
 *       [--seeds 1,2,3] [--faults N] [--steps N] [--deadline S] [--mix kind=w,...] [--overlap P] [--time-scale F] [--keep]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { exitWhenDone, writeScorecardJson } from './bench-kit';
import {
  FAULT_KINDS,
  parseFaultMix,
  passRateSvg,
  DEFAULT_GRPO_JOB,
  GrpoJob,
  DEFAULT_SYSTEM_CHAOS,
  DEFAULT_TIME_SCALE,
  formatSystemScorecard,
  runSystemChaos,
  SystemScorecard,
  formatSideBySide,
  NetnsHosts,
} from '@robustrl/harness';

function passRate(raw: string | undefined): number | null {
  if (raw === undefined || raw === '') return null;
  const rate = Number(raw);
  if (!(rate >= 0 && rate <= 1)) throw new Error(`--baseline-pass-rate must be a number in 0..1, got '${raw}'`);
  return rate;
}

/** The GRPO job's steps: the pass rate rises clearly within them (docs/benchmarks.md). */
const GRPO_STEPS = 40;

const USAGE = `usage: node bench/dist/chaos-system.js [options]
  --job NAME        reference (the stand-in, default) or grpo (examples/grpo: torch + vLLM; needs deploy/local/vllm.sh ensure) (CHAOS_JOB)
  --hosts KIND      shared (one host) or netns (a network namespace per machine; root; default for grpo when root) (CHAOS_HOSTS)
  --policy P        role-based (default) or task-restart: every fault restarts the whole task (CHAOS_POLICY)
  --seeds 1,2,3     seeds, one campaign each, one after the other (CHAOS_SEEDS; default 1,2,3)
  --faults N        faults per campaign (CHAOS_FAULTS; default ${DEFAULT_SYSTEM_CHAOS.faults})
  --steps N         training steps (CHAOS_STEPS; default ${DEFAULT_SYSTEM_CHAOS.steps} for the reference job, ${GRPO_STEPS} for grpo)
  --deadline S      seconds one campaign may take in all (CHAOS_DEADLINE_SECONDS; default ${DEFAULT_SYSTEM_CHAOS.deadlineSeconds})
  --mix k=w,...     fault weights (CHAOS_MIX), kinds: ${FAULT_KINDS.join(', ')}
  --overlap P       the share of faults injected on top of the previous one, no settle wait (CHAOS_OVERLAP; default 0.25)
  --time-scale F    the product's detection windows and command timeout divided by F (CHAOS_TIME_SCALE; default ${DEFAULT_TIME_SCALE})
  --keep            keep each run's folder: servers' data and every process's log (CHAOS_KEEP=1); the servers are stopped either way
  --baseline        grpo: first a fault-free run of the same seed, whose last pass rate the faulted run is held to (CHAOS_BASELINE=1)
  --baseline-pass-rate R  grpo: the last pass rate of a fault-free run made before (same seed and steps), instead of --baseline (CHAOS_BASELINE_PASS_RATE)
  --compare         then the same schedule with task restarts for every fault; prints the runs side by side (CHAOS_COMPARE=1)
  --chart DIR       grpo: write DIR/grpo-pass-rate-seed<N>.svg, pass rate against step of every run of the seed (CHAOS_CHART)`;

function parse(argv: string[], env: NodeJS.ProcessEnv) {
  const flags = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    }
    if (a === '--keep' || a === '--baseline' || a === '--compare') {
      flags.set(a.slice(2), '1');
      continue;
    }
    const m = /^--(seeds|faults|steps|deadline|mix|job|hosts|policy|chart|baseline-pass-rate|overlap|time-scale)(?:=(.*))?$/.exec(a);
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
  const job = flags.get('job') ?? env.CHAOS_JOB ?? 'reference';
  if (job !== 'reference' && job !== 'grpo') throw new Error(`--job must be reference or grpo, got '${job}'`);
  const hosts = flags.get('hosts') ?? env.CHAOS_HOSTS ?? (job === 'grpo' && NetnsHosts.unavailable() === null ? 'netns' : 'shared');
  if (hosts !== 'shared' && hosts !== 'netns') throw new Error(`--hosts must be shared or netns, got '${hosts}'`);
  const policy = flags.get('policy') ?? env.CHAOS_POLICY ?? 'role-based';
  if (policy !== 'role-based' && policy !== 'task-restart') throw new Error(`--policy must be role-based or task-restart, got '${policy}'`);
  const fraction = (name: string, envName: string, fallback: number, min: number, max: number) => {
    const raw = flags.get(name) ?? env[envName];
    if (raw === undefined || raw === '') return fallback;
    const x = Number(raw);
    if (!(x >= min && x <= max)) throw new Error(`--${name} (or ${envName}) must be a number in ${min}..${max}, got '${raw}'`);
    return x;
  };
  return {
    seeds,
    job,
    overlap: fraction('overlap', 'CHAOS_OVERLAP', 0.25, 0, 1),
    timeScale: fraction('time-scale', 'CHAOS_TIME_SCALE', DEFAULT_TIME_SCALE, 1, 1000),
    hosts,
    policy,
    faults: integer('faults', 'CHAOS_FAULTS', job === 'grpo' ? 15 : DEFAULT_SYSTEM_CHAOS.faults, 0),
    steps: integer('steps', 'CHAOS_STEPS', job === 'grpo' ? GRPO_STEPS : DEFAULT_SYSTEM_CHAOS.steps, 3),
    deadlineSeconds: integer('deadline', 'CHAOS_DEADLINE_SECONDS', job === 'grpo' ? 3600 : DEFAULT_SYSTEM_CHAOS.deadlineSeconds, 60),
    weights: parseFaultMix(flags.get('mix') ?? env.CHAOS_MIX ?? ''),
    keep: flags.has('keep') || env.CHAOS_KEEP === '1',
    baseline: flags.has('baseline') || env.CHAOS_BASELINE === '1',
    compare: flags.has('compare') || env.CHAOS_COMPARE === '1',
    chart: flags.get('chart') ?? env.CHAOS_CHART ?? null,
    baselinePassRate: passRate(flags.get('baseline-pass-rate') ?? env.CHAOS_BASELINE_PASS_RATE),
  };
}

async function main(): Promise<void> {
  const o = parse(process.argv.slice(2), process.env);
  const cards: SystemScorecard[] = [];
  for (const seed of o.seeds) {
    const run = async (label: string, faults: number, policy: string, baselinePassRate: number | null) => {
      process.stderr.write(
        `[chaos] seed ${seed}, ${label}: ${o.job} job, ${faults} faults (${Math.round(o.overlap * 100)} % overlapping), ${o.steps} steps, ${o.hosts} hosts, ${policy} recovery, product timings ÷ ${o.timeScale}\n`,
      );
      const card = await runSystemChaos({
        ...o,
        faults,
        job: o.job === 'grpo' ? new GrpoJob({ ...DEFAULT_GRPO_JOB, baselinePassRate }) : undefined,
        hosts: o.hosts as 'shared' | 'netns',
        policy: policy as 'role-based' | 'task-restart',
        seed,
        progress: (line) => process.stderr.write(`[chaos seed ${seed} ${label}] ${line}\n`),
      });
      cards.push(card);
      process.stdout.write(`${formatSystemScorecard(card).replace(/^## seed (\d+)/, `## seed $1, ${label}`)}\n\n`);
      return { label, card };
    };
    const runs = [];
    const baseline = o.baseline ? await run('fault-free', 0, o.policy, null) : null;
    if (baseline) runs.push(baseline);
    const lastRate = baseline?.card.evaluations.at(-1)?.[1] ?? o.baselinePassRate;
    runs.push(await run(o.policy === 'task-restart' ? 'task restarts' : 'role-based recovery', o.faults, o.policy, lastRate));
    if (o.compare) runs.push(await run('task restarts', o.faults, 'task-restart', lastRate));
    if (runs.length > 1) process.stdout.write(`### seed ${seed} side by side\n\n${formatSideBySide(runs)}\n\n`);
    if (o.chart && o.job === 'grpo') {
      mkdirSync(o.chart, { recursive: true });
      const file = join(o.chart, `grpo-pass-rate-seed${seed}.svg`);
      writeFileSync(
        file,
        passRateSvg(
          `GRPO a+b= (examples/grpo), seed ${seed}: greedy pass rate`,
          runs.map((r) => ({ label: `${r.label} (${r.card.injected.length} faults)`, points: r.card.evaluations })),
        ),
      );
      process.stderr.write(`[chaos] wrote ${file}\n`);
    }
  }
  const failed = [...new Set(cards.filter((c) => !c.ok).map((c) => c.seed))];
  process.stdout.write(
    failed.length === 0 ? `all invariants held for seeds ${o.seeds.join(', ')}\n` : `INVARIANTS VIOLATED for seed(s) ${failed.join(', ')}\n`,
  );
  writeScorecardJson(cards);
  exitWhenDone('chaos', failed.length === 0 ? 0 : 1);
}

main().catch((err: unknown) => {
  process.stderr.write(`chaos failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
