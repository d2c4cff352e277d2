/**
 * `npm run bench:ingest` — how fast the deciding services take a large job's telemetry, against a bare
 * kafkajs consumer of the same topic in the same run (≥ 50k records/s and ≥ 0.5x the bare
 * consumer for one 1,024-machine job).
 *
 *   node bench/dist/ingest.bench.js [--records N] [--steady-seconds S] [--parallel-jobs J] [--shards K]
 *
 * Cases: one job of 128, 1,024 and 8,192 machines (detector; the controller and the rollout manager too
 * for 1,024), and J jobs of 1,024 machines at once, each on a partition of its own (the detector as one
 * process, then as K shards — K processes, docs/contributors/snapshots.md "Sharding the detector" — on the same backlog).
 * Each case publishes N telemetry records (default 100,000) to fresh topics, then each consumer works
 * through them as its own process on the real broker and PostgreSQL (KAFKA_BROKERS / DATABASE_URL, else
 * the local services); then S seconds (default 10) of steady load at half the drain rate, sampling the lag.
 * Progress on stderr, the table (markdown) on stdout.
 */
import { IngestCase, IngestRow, runIngestCase } from './ingest';
import { localServiceSetting, parseIntegerOptions } from './bench-kit';

async function main(): Promise<void> {
  const progress = (line: string) => process.stderr.write(`${line}\n`);
  const options = parseIntegerOptions(process.argv.slice(2), process.env, 'bench/dist/ingest.bench.js', {
    records: { env: 'BENCH_RECORDS', fallback: 100_000, min: 1_000, placeholder: 'N' },
    'steady-seconds': { env: 'BENCH_STEADY_SECONDS', fallback: 10, min: 0, placeholder: 'S' },
    'parallel-jobs': { env: 'BENCH_PARALLEL_JOBS', fallback: 4, min: 1, placeholder: 'J' },
    shards: { env: 'BENCH_SHARDS', fallback: 2, min: 1, placeholder: 'K' },
  });
  const { records } = options;
  const steadySeconds = options['steady-seconds'];
  const parallelJobs = options['parallel-jobs'];
  const brokers = localServiceSetting('KAFKA_BROKERS', progress).split(',');
  const databaseUrl = localServiceSetting('DATABASE_URL', progress);
  const cases: IngestCase[] = [
    { machines: 128, jobs: 1, records, services: ['detector'], steadySeconds },
    { machines: 1_024, jobs: 1, records, services: ['detector', 'controller', 'rollout-manager'], steadySeconds },
    { machines: 8_192, jobs: 1, records, services: ['detector'], steadySeconds },
    {
      machines: 1_024,
      jobs: parallelJobs,
      records: records * parallelJobs,
      services: ['detector'],
      detectorShards: options.shards > 1 ? [1, options.shards] : [1],
      steadySeconds,
    },
  ];
  const rows: IngestRow[] = [];
  for (const c of cases) {
    progress(`case: ${c.jobs} job(s) × ${c.machines} machines`);
    rows.push(...(await runIngestCase(c, brokers, databaseUrl, progress)));
  }
  process.stdout.write(formatIngest(rows));
}

export function formatIngest(rows: IngestRow[]): string {
  const bareOf = (r: IngestRow, mode: string): IngestRow =>
    rows.find((b) => b.consumer === `bare kafkajs (${mode})` && b.machines === r.machines && b.jobs === r.jobs)!;
  const lines = [
    '| job(s) × machines | consumer | records | drain (records/s) | × bare eachBatch | × bare eachMessage | CPU µs per record | steady (records/s) | largest lag | stored bytes per record |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map((r) => {
      const ratio = ['eachBatch', 'eachMessage'].map((mode) => (r.drainRate / bareOf(r, mode).drainRate).toFixed(2)).join(' | ');
      const steady = r.steady ? `${Math.round(r.steady.rate)}` : '';
      const lag = r.steady ? `${r.steady.maxLagRecords} (${r.steady.maxLagMs} ms)` : '';
      const stored = r.storedBytesPerRecord === undefined ? '' : r.storedBytesPerRecord.toFixed(1);
      const consumer = (r.shards ?? 1) > 1 ? `${r.consumer} (${r.shards} shards)` : r.consumer;
      const cpu = r.cpuUsPerRecord === undefined ? '' : r.cpuUsPerRecord.toFixed(1);
      return `| ${r.jobs} × ${r.machines} | ${consumer} | ${r.records} | ${Math.round(r.drainRate)}${r.finished ? '' : ' (unfinished)'} | ${ratio} | ${cpu} | ${steady} | ${lag} | ${stored} |`;
    }),
  ];
  return `${lines.join('\n')}\n`;
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
