/**
 * `npm run bench:router` — the LLM rollout router against what else routes agent loops to engines, side
 * by side in one run, on four fake vLLM engines that answer at once (fake-engine.ts), so what is measured
 * is the router's own cost:
 *  - direct: the load generator spreads requests over the engines itself, no router (the floor);
 *  - the SGLang Model Gateway (sglang-router 0.3.2), with a TCP_NODELAY shim and as shipped;
 *  - the Shepherd Model Gateway (smg 1.13.0), its successor;
 *  - a Node.js proxy that passes bytes through untouched (node-passthrough.ts): the floor of a Node router;
 *  - robustrl's router (the rollout manager service) without recording, recording through the request
 *    manager over HTTP, and recording into the trajectory store itself (STORE_RECORDING_ENV, targets.ts),
 *    with one router and with two router replicas the load is spread over (docs/router.md "Scaling out").
 * Each target runs two workloads — `single` (every request a new trajectory) and `multi-turn` (trajectories
 * of several turns, for prefix-cache affinity) — at each level: streamed at concurrency 1, 64, 256 and not
 * streamed at 64, a closed loop (load-generator.ts) with a warm-up and a timed window. Reported: requests/s,
 * p50/p99 latency, errors, CPU per request of every process involved (/proc), the affinity hit rate, and
 * ratios of robustrl's configurations to robustrl without recording and to the SGLang gateway.
 *
 *   npm run bench:router -- [--seconds 15] [--warmup-seconds 3] [--levels s1,s64,s256,n64] [--targets a,b]
 *                           [--workloads single,multi-turn] [--turns 4] [--rounds 1] [--json FILE]
 *
 * Needs the local Kafka and PostgreSQL (KAFKA_BROKERS / DATABASE_URL, else deploy/local/services.sh is
 * started) and the gateways (deploy/local/router-baselines.sh ensure; the npm script runs it). A target
 * that cannot start is a row saying why. Progress goes to stderr, the tables (markdown) to stdout.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { IDENTITY_HEADERS } from '@robustrl/rollout-manager';
import { freePort } from '@robustrl/harness';
import { exitWhenDone, localServiceSetting, writeScorecardJson } from '../bench-kit';
import { createBenchDatabase, deleteTopics, Engines, recordedTrajectories, routerBaselines, startEngines } from './bench-infra';
import { CPU_ROLES, enginesForget, LevelResult, runLevel } from './measure';
import { roundOrder } from './rounds';
import { levelName, Options, parseOptions } from './options';
import { renderReport, TargetRun } from './report';
import { Target, TargetContext } from './targets';
import type { Workload } from './workloads';

const ENGINES = 4;
const progress = (line: string) => process.stderr.write(`[bench:router] ${line}\n`);
const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

function levelLine(name: string, workload: Workload, r: LevelResult): string {
  const { requestsPerSecond, p50Ms, p99Ms, errors, errorSamples } = r.load;
  const cpu = CPU_ROLES.filter((role) => r.cpuMsPerRequest[role] !== undefined)
    .map((role) => `${role} ${r.cpuMsPerRequest[role]!.toFixed(3)}`)
    .join(', ');
  const hits = r.affinity.multiTurnRequests > 0 ? `, affinity ${((100 * r.affinity.hits) / r.affinity.multiTurnRequests).toFixed(1)}%` : '';
  const why = errors > 0 && errorSamples.length > 0 ? ` (first: ${errorSamples[0].slice(0, 160)})` : '';
  const recorded = r.recorded === undefined ? '' : `, ${r.recorded ?? 0} trajectories recorded`;
  return (
    `${name} ${workload} ${levelName(r.level)}: ${Math.round(requestsPerSecond)} req/s, p50 ${p50Ms?.toFixed(2)} ms, p99 ${p99Ms?.toFixed(2)} ms, ` +
    `${errors} errors${why}${hits}${recorded}; CPU ms/request: ${cpu}; window ${(r.observedWindowMs / 1000).toFixed(2)} s`
  );
}

/** One target under one workload: start it, run every level, stop it — whatever happens, nothing left running. */
async function runTarget(target: Target, workload: Workload, ctx: TargetContext, engines: Engines, opts: Options, runId: string): Promise<TargetRun> {
  const run: TargetRun = { target: target.name, label: target.label, workload, launch: [], error: null, levels: [] };
  progress(`${target.name} (${workload}): starting`);
  await enginesForget(engines);
  let running;
  try {
    running = await target.start(ctx, workload);
  } catch (err) {
    run.error = message(err);
    progress(`${target.name} (${workload}): could not start: ${run.error}`);
    return run;
  }
  run.launch = running.launch;
  try {
    for (const level of opts.levels) {
      const dead = engines.children.find((c) => !c.running);
      if (dead) throw new Error(`${dead.name} exited (${dead.exitDescription()})\n${dead.tail()}`);
      const batch = `${runId}-${target.name}-${workload}-${level.stream ? 's' : 'n'}${level.concurrency}`;
      try {
        const r = await runLevel(running, engines, level, {
          workload,
          warmupSeconds: opts.warmupSeconds,
          seconds: opts.seconds,
          turns: opts.turns,
          jobId: ctx.jobId,
          runId: batch,
          headers: IDENTITY_HEADERS,
        });
        if (running.processes.some((p) => p.role === 'PostgreSQL')) r.recorded = await recordedTrajectories(ctx.databaseUrl, batch).catch(() => null);
        run.levels.push(r);
        progress(levelLine(target.name, workload, r));
      } catch (err) {
        run.levels.push({ level, error: message(err) });
        progress(`${target.name} ${workload} ${levelName(level)}: failed: ${message(err)}`);
      }
    }
  } finally {
    await running.stop();
  }
  return run;
}

async function main(): Promise<void> {
  const opts = parseOptions(process.argv.slice(2));
  const databaseBase = localServiceSetting('DATABASE_URL', progress);
  const kafkaBrokers = localServiceSetting('KAFKA_BROKERS', progress);
  const runId = randomBytes(3).toString('hex');
  const baselines = routerBaselines();
  if ('missing' in baselines) progress(baselines.missing);
  const database = await createBenchDatabase(databaseBase);
  let engines: Engines | null = null;
  const runs: TargetRun[] = [];
  const topicPrefix = `bench-router-${runId}.`;
  let current = '';
  try {
    engines = await startEngines(ENGINES);
    // What a router asks of an engine beyond vLLM's API (its probes, its model discovery), once per path.
    const asked = new Set<string>();
    for (const c of engines.children) {
      c.onLine((line) => {
        const path = / 404 for (.*)$/.exec(line)?.[1];
        if (path !== undefined && !asked.has(path)) progress(`${current}: asked the engines for ${path}, not served (404)`);
        if (path !== undefined) asked.add(path);
      });
    }
    progress(
      `run ${runId}: ${ENGINES} fake engines at ${engines.urls.join(' ')}; database ${database.name}; ` +
        `levels ${opts.levels.map(levelName).join(' / ')}; ${opts.warmupSeconds} s warm-up + ${opts.seconds} s each`,
    );
    const ctx: TargetContext = {
      engineUrls: engines.urls,
      kafkaBrokers,
      databaseUrl: database.url,
      databaseName: database.name,
      topicPrefix,
      jobId: `bench-router-${runId}`,
      baselines,
      freePort,
      progress,
    };
    for (let round = 0; round < opts.rounds; round++) {
      if (opts.rounds > 1) progress(`round ${round + 1} of ${opts.rounds}`);
      for (const target of roundOrder(opts.targets, round)) {
        for (const workload of opts.workloads) {
          current = target.name;
          // Each round's batches are its own: a recorded trajectory of round 1 is not "already stored" in round 2.
          runs.push({ ...(await runTarget(target, workload, ctx, engines, opts, opts.rounds > 1 ? `${runId}r${round + 1}` : runId)), round });
        }
      }
    }
  } finally {
    await Promise.all((engines?.children ?? []).map((c) => c.stop()));
    await database.drop().catch((err: unknown) => progress(`could not drop ${database.name}: ${message(err)}`));
    await deleteTopics(kafkaBrokers, topicPrefix).catch((err: unknown) => progress(`could not delete the ${topicPrefix}* topics: ${message(err)}`));
  }
  const preamble = [
    `## bench:router — ${ENGINES} fake vLLM engines (16 tokens, answered at once), closed loop; ${opts.warmupSeconds} s warm-up + ${opts.seconds} s per level` +
      (opts.rounds > 1 ? `; ${opts.rounds} rounds, every target once a round` : ''),
    '',
    `Node ${process.version}; CPU per request from /proc (user + system) over the timed window. Multi-turn trajectories have ${opts.turns} turns.`,
  ];
  process.stdout.write(`${renderReport(runs, opts.levels, opts.workloads, preamble)}\n`);
  const result = { runId, options: { ...opts, targets: opts.targets.map((t) => t.name) }, runs };
  if (opts.json) writeFileSync(opts.json, JSON.stringify(result, null, 1));
  else writeScorecardJson(result);
}

// Ctrl-C: exit through 'exit', where every process the bench started is killed (bench-child.ts).
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

main().then(
  () => exitWhenDone('bench:router', 0),
  (err: unknown) => {
    progress(`FAILED: ${message(err)}`);
    process.exit(1);
  },
);
