/**
 * `npm run chaos:infra` — the infrastructure fault-injection campaign: a broker and a
 * PostgreSQL server of its own, the detector, controller and rollout manager as their own processes, a
 * healthy job reporting throughout; then an oversized record, malformed records on every topic, a
 * PostgreSQL outage under load, a broker outage, and kill -9 / SIGTERM restarts. Prints a scorecard
 * (markdown, stdout; progress on stderr) and exits 1 if any check failed.
 *
 *   node bench/dist/chaos-infra.js [--trainers N] [--rollouts N] [--store-outage S] [--broker-outage S] [--restart-budget-ms MS]
 *
 * Takes about six minutes with the defaults (60 s and 90 s outages). ROBUSTRL_CHAOS_KEEP=1 keeps the
 * servers' folder and the services' logs (the servers are stopped either way); CHAOS_SCORECARD_JSON=FILE
 * also writes the scorecard as JSON. Exits when done (exitWhenDone), naming anything left open.
 */
import { exitWhenDone, parseIntegerOptions, writeScorecardJson } from './bench-kit';
import { DEFAULT_CHAOS_OPTIONS, formatScorecard, runInfraChaos } from '@robustrl/harness';

async function main(): Promise<void> {
  const o = parseIntegerOptions(process.argv.slice(2), process.env, 'bench/dist/chaos-infra.js', {
    trainers: { env: 'CHAOS_TRAINERS', fallback: DEFAULT_CHAOS_OPTIONS.trainers, min: 1, placeholder: 'N' },
    rollouts: { env: 'CHAOS_ROLLOUTS', fallback: DEFAULT_CHAOS_OPTIONS.rollouts, min: 1, placeholder: 'N' },
    'store-outage': { env: 'CHAOS_STORE_OUTAGE_SECONDS', fallback: DEFAULT_CHAOS_OPTIONS.storeOutageSeconds, min: 5, placeholder: 'S' },
    'broker-outage': { env: 'CHAOS_BROKER_OUTAGE_SECONDS', fallback: DEFAULT_CHAOS_OPTIONS.brokerOutageSeconds, min: 5, placeholder: 'S' },
    'restart-budget-ms': { env: 'CHAOS_RESTART_BUDGET_MS', fallback: DEFAULT_CHAOS_OPTIONS.restartBudgetMs, min: 100, placeholder: 'MS' },
  });
  const card = await runInfraChaos({
    trainers: o.trainers,
    rollouts: o.rollouts,
    storeOutageSeconds: o['store-outage'],
    brokerOutageSeconds: o['broker-outage'],
    restartBudgetMs: o['restart-budget-ms'],
    progress: (line) => process.stderr.write(`[chaos] ${line}\n`),
  });
  process.stdout.write(`${formatScorecard(card)}\n`);
  process.stdout.write(card.ok ? '\nall checks passed\n' : '\nSOME CHECKS FAILED\n');
  writeScorecardJson(card);
  exitWhenDone('chaos:infra', card.ok ? 0 : 1);
}

main().catch((err: unknown) => {
  process.stderr.write(`chaos:infra failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
