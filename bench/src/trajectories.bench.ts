/**
 * `npm run bench:trajectories` — the request manager's trajectory store on the real PostgreSQL:
 *  1. sustained turn appends/s through the TurnWriter, many trajectories appending concurrently, turns of
 *     realistic size (1–4 KiB JSON), side by side with a plain `pg` multi-row INSERT loop of the same rows;
 *  2. p50/p99 time to fetch a 512-trajectory completed batch with its turns (TrajectoryStore.completedOfBatch),
 *     side by side with one plain `pg` SELECT of the same rows.
 *
 *   node bench/dist/trajectories.bench.js [--trajectories T] [--turns K] [--repeats R] [--fetches F]
 *   (env fallbacks: BENCH_TRAJECTORIES, BENCH_TURNS, BENCH_REPEATS, BENCH_FETCHES; DATABASE_URL, else the
 *   local services are started)
 *
 * Every run writes T trajectories × K turns under a fresh job id into a throw-away database (created at
 * start, dropped at the end). Variants, each a warm-up then R measured runs, interleaved:
 *  - plain pg (baseline): one connection, INSERT … VALUES (…),(…) of 500 rows per statement, in a loop —
 *    the floor cost of getting these bytes into this table, with no idempotency or bookkeeping;
 *  - TurnWriter: T concurrent "agent" loops, each appending its trajectory's turns one after another and
 *    awaiting each (as an AgentWorker does after every tool iteration); defaults (5 ms, 500 turns, 2 flushes);
 *  - appendTurns unbatched: the same loops calling TrajectoryStore.appendTurns per turn (one statement per
 *    turn), to show what the batching buys.
 * Progress goes to stderr, the result tables (markdown) to stdout.
 */
import { randomBytes } from 'node:crypto';
import { localServiceSetting, median, parseIntegerOptions, percentile } from './bench-kit';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { EventStore } from '@robustrl/store';
import { TurnInput } from '@robustrl/contracts';
import { TRAJECTORY_STORE_MIGRATIONS, TrajectoryStore, TurnWriter } from '@robustrl/request-manager';

const BASELINE_BATCH = 500;
const progress = (line: string) => process.stderr.write(`[bench:trajectories] ${line}\n`);

interface Options {
  trajectories: number;
  turns: number;
  repeats: number;
  fetches: number;
}

type Variant = 'pg' | 'writer' | 'unbatched';
const LABEL: Record<Variant, string> = {
  pg: 'plain pg multi-row INSERT (baseline)',
  writer: 'TurnWriter (batched appendTurns)',
  unbatched: 'appendTurns per turn (unbatched)',
};

function parseOptions(argv: string[], env: NodeJS.ProcessEnv): Options {
  return parseIntegerOptions(argv, env, 'bench/dist/trajectories.bench.js', {
    trajectories: { env: 'BENCH_TRAJECTORIES', fallback: 512, min: 1, placeholder: 'T' },
    turns: { env: 'BENCH_TURNS', fallback: 16, min: 1, placeholder: 'K' },
    repeats: { env: 'BENCH_REPEATS', fallback: 3, min: 1, placeholder: 'R' },
    fetches: { env: 'BENCH_FETCHES', fallback: 30, min: 1, placeholder: 'F' },
  });
}

/** DATABASE_URL, or start the local services (idempotent) and use what they print. */
function resolveDatabaseUrl(): string {
  return localServiceSetting('DATABASE_URL', progress);
}

/** Deterministic pseudo-random sizes, so every variant writes byte-identical rows. */
function turnSize(trajectory: number, index: number): number {
  const x = Math.sin(trajectory * 7919 + index * 104729) * 10_000;
  return 1024 + Math.floor((x - Math.floor(x)) * 3 * 1024); // 1–4 KiB
}

const KINDS = ['model-output', 'tool-call', 'tool-result'] as const;

/** K turns for each of T trajectories of one run: chat-style JSON content of 1–4 KiB. */
function buildTurns(runId: string, opts: Options): TurnInput[][] {
  const filler = 'The model reasons about the tool output step by step and writes the next call. ';
  return Array.from({ length: opts.trajectories }, (_, t) =>
    Array.from({ length: opts.turns }, (_, i) => {
      const kind = KINDS[i % 3];
      const size = turnSize(t, i);
      const text = filler.repeat(Math.ceil(size / filler.length)).slice(0, size - 80);
      const content =
        kind === 'tool-call'
          ? { role: 'assistant', tool: 'python', arguments: { code: text } }
          : kind === 'tool-result'
            ? { role: 'tool', tool: 'python', stdout: text, exitCode: 0 }
            : { role: 'assistant', content: text };
      return {
        trajectoryId: `${runId}/t${t}`,
        turnId: `${runId}/t${t}/${i}`,
        turnIndex: i,
        kind,
        content,
        rolloutId: kind === 'tool-result' ? null : `rollout-${t % 8}/dp0`,
        weightVersion: 3,
        tokens: Math.round(size / 4),
      };
    }),
  );
}

async function startRun(trajectories: TrajectoryStore, jobId: string, runId: string, opts: Options): Promise<void> {
  await trajectories.startTrajectories(
    Array.from({ length: opts.trajectories }, (_, t) => ({
      trajectoryId: `${runId}/t${t}`,
      jobId,
      batchId: runId,
      step: 0,
      promptId: `prompt-${t >> 3}`,
      sampleIndex: t & 7,
      prompt: { messages: [{ role: 'user', content: `problem ${t >> 3}` }] },
      ownerRolloutId: `rollout-${t % 8}/dp0`,
    })),
  );
}

/** The baseline: the same rows, 500 per INSERT statement, one connection, in a loop. */
async function runPlainPg(client: Client, turns: TurnInput[][]): Promise<number> {
  const rows = turns.flat();
  const t0 = performance.now();
  for (let b = 0; b < rows.length; b += BASELINE_BATCH) {
    const chunk = rows.slice(b, b + BASELINE_BATCH);
    const params: unknown[] = [];
    const values = chunk.map((r) => {
      const p = params.length;
      params.push(r.trajectoryId, 0, r.turnIndex, r.turnId, r.kind, JSON.stringify(r.content), r.rolloutId, r.weightVersion, r.tokens);
      return `($${p + 1}, $${p + 2}, $${p + 3}, $${p + 4}, $${p + 5}, $${p + 6}, $${p + 7}, $${p + 8}, $${p + 9})`;
    });
    await client.query(
      `INSERT INTO robustrl_trajectory_turns (trajectory_id, attempt, turn_index, turn_id, kind, content, rollout_id, weight_version, tokens)
       VALUES ${values.join(', ')}`,
      params,
    );
  }
  return (performance.now() - t0) / 1000;
}

/** T concurrent agent loops, each appending its own turns in order, awaiting each. */
async function runLoops(turns: TurnInput[][], append: (turn: TurnInput) => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await Promise.all(
    turns.map(async (own) => {
      for (const turn of own) await append(turn);
    }),
  );
  return (performance.now() - t0) / 1000;
}

const fmtInt = (x: number) => Math.round(x).toLocaleString('en-US');
const fmtMs = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

async function main(): Promise<void> {
  const opts = parseOptions(process.argv.slice(2), process.env);
  const baseUrl = resolveDatabaseUrl();
  const dbName = `robustrl_bench_${randomBytes(4).toString('hex')}`;
  const admin = new Client({ connectionString: baseUrl });
  try {
    await admin.connect();
  } catch (err) {
    throw new Error(`cannot reach PostgreSQL at DATABASE_URL: ${(err as Error).message}. Start it with \`bash deploy/local/services.sh up\`.`);
  }
  await admin.query(`CREATE DATABASE ${dbName}`);
  const url = new URL(baseUrl);
  url.pathname = `/${dbName}`;
  const store = await EventStore.open({ kind: 'postgres', url: url.toString() }, { migrations: TRAJECTORY_STORE_MIGRATIONS });
  const plain = new Client({ connectionString: url.toString() });
  await plain.connect();
  const serverVersion = ((await plain.query('SHOW server_version')).rows[0] as { server_version: string }).server_version;

  try {
    const trajectories = new TrajectoryStore(store); // no bus: this measures the store
    const jobId = `bench-${Date.now().toString(36)}`;
    const n = opts.trajectories * opts.turns;
    const bytes = buildTurns('probe', opts)
      .flat()
      .reduce((sum, t) => sum + JSON.stringify(t.content).length, 0);
    progress(
      `${opts.trajectories} trajectories × ${opts.turns} turns = ${n} turns per run (${(bytes / n / 1024).toFixed(2)} KiB content on average), ` +
        `1 warm-up + ${opts.repeats} runs per variant; database ${dbName} on PostgreSQL ${serverVersion}`,
    );

    let seq = 0;
    const run = async (variant: Variant): Promise<{ seconds: number; runId: string }> => {
      const runId = `${variant}-${++seq}`;
      await startRun(trajectories, jobId, runId, opts);
      const turns = buildTurns(runId, opts);
      let seconds: number;
      if (variant === 'pg') seconds = await runPlainPg(plain, turns);
      else if (variant === 'writer') {
        const writer = new TurnWriter(trajectories);
        seconds = await runLoops(turns, (t) => writer.append(t));
        await writer.close();
      } else seconds = await runLoops(turns, (t) => trajectories.appendTurns([t]));
      const [{ c }] = (await plain.query(`SELECT count(*)::int AS c FROM robustrl_trajectory_turns WHERE trajectory_id LIKE $1`, [`${runId}/%`])).rows;
      if (c !== n) throw new Error(`${variant} run ${runId} stored ${c} turns, expected ${n}`);
      return { seconds, runId };
    };

    const variants: Variant[] = ['pg', 'writer', 'unbatched'];
    const rates = new Map<Variant, number[]>(variants.map((v) => [v, []]));
    for (const v of variants) {
      const r = await run(v);
      progress(`warm-up ${v}: ${fmtInt(n / r.seconds)} turns/s (${r.seconds.toFixed(2)} s)`);
    }
    let lastWriterRun = '';
    for (let i = 1; i <= opts.repeats; i++) {
      for (const v of variants) {
        const r = await run(v);
        rates.get(v)!.push(n / r.seconds);
        if (v === 'writer') lastWriterRun = r.runId;
        progress(`run ${i}/${opts.repeats} ${v}: ${fmtInt(n / r.seconds)} turns/s (${r.seconds.toFixed(2)} s)`);
      }
    }

    // Fetch: the last TurnWriter run's batch, all completed, as a restarted trainer asks for it.
    await plain.query(`UPDATE robustrl_trajectories SET status = 'completed', completed_at = now() WHERE batch_id = $1`, [lastWriterRun]);
    await plain.query('ANALYZE');
    const fetchMs = { store: [] as number[], pg: [] as number[] };
    let payloadBytes = 0;
    for (let i = 0; i < opts.fetches + 2; i++) {
      let t0 = performance.now();
      const batch = await trajectories.completedOfBatch(jobId, lastWriterRun, { currentWeightVersion: 4, acceptance: { maxStaleness: 1 } });
      const storeMs = performance.now() - t0;
      const got = batch.trajectories.reduce((s, t) => s + t.turns.length, 0);
      if (batch.trajectories.length !== opts.trajectories || got !== n)
        throw new Error(`fetch returned ${batch.trajectories.length} trajectories / ${got} turns`);
      t0 = performance.now();
      const raw = await plain.query(
        `SELECT t.trajectory_id, t.prompt, u.turn_index, u.kind, u.content, u.rollout_id, u.weight_version, u.tokens
           FROM robustrl_trajectories t JOIN robustrl_trajectory_turns u ON u.trajectory_id = t.trajectory_id AND u.attempt = t.attempt
          WHERE t.job_id = $1 AND t.batch_id = $2 AND t.status = 'completed'
          ORDER BY t.trajectory_id, u.turn_index`,
        [jobId, lastWriterRun],
      );
      const pgMs = performance.now() - t0;
      if (raw.rowCount !== n) throw new Error(`plain fetch returned ${raw.rowCount} rows`);
      if (i >= 2) {
        // the first two are warm-up
        fetchMs.store.push(storeMs);
        fetchMs.pg.push(pgMs);
      }
      payloadBytes = JSON.stringify(batch.trajectories).length;
    }

    const base = median(rates.get('pg')!);
    const lines: string[] = [];
    lines.push(
      `${fmtInt(opts.trajectories)} trajectories × ${opts.turns} turns = ${fmtInt(n)} turns per run, ${(bytes / n / 1024).toFixed(2)} KiB content per turn on average; ` +
        `median of ${opts.repeats} run(s) after 1 warm-up; Node ${process.version}, PostgreSQL ${serverVersion}.`,
    );
    lines.push('');
    lines.push('| variant | turns/s | MiB/s (content) | vs plain pg |');
    lines.push('|---|---:|---:|---:|');
    for (const v of variants) {
      const r = median(rates.get(v)!);
      lines.push(`| ${LABEL[v]} | ${fmtInt(r)} | ${((r * bytes) / n / (1024 * 1024)).toFixed(1)} | ${(r / base).toFixed(2)}x |`);
    }
    lines.push('');
    lines.push(
      `Fetch of one completed batch (${fmtInt(opts.trajectories)} trajectories, ${fmtInt(n)} turns, ${(payloadBytes / (1024 * 1024)).toFixed(1)} MiB as JSON), ${opts.fetches} fetches after 2 warm-up:`,
    );
    lines.push('');
    lines.push('| fetch | p50 ms | p99 ms | p50 vs plain pg |');
    lines.push('|---|---:|---:|---:|');
    const pg50 = percentile(fetchMs.pg, 50);
    lines.push(`| plain pg SELECT … JOIN (baseline) | ${fmtMs(pg50)} | ${fmtMs(percentile(fetchMs.pg, 99))} | 1.00x |`);
    const st50 = percentile(fetchMs.store, 50);
    lines.push(`| TrajectoryStore.completedOfBatch | ${fmtMs(st50)} | ${fmtMs(percentile(fetchMs.store, 99))} | ${(st50 / pg50).toFixed(2)}x |`);
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await plain.end().catch(() => undefined);
    await store.close().catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
    await admin.end().catch(() => undefined);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`[bench:trajectories] FAILED: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
