/**
 * `npm run bench:restart-consume` — how long a restarted deciding service takes to consume again.
 *
 *   node bench/dist/restart-consume.bench.js [--repeats R]      (env BENCH_REPEATS; default 3)
 *
 * For the detector and the controller (built, each its own process, KAFKA_BROKERS / DATABASE_URL or the
 * local services), under a steady load of ten records a second: stop the process with kill -9 or SIGTERM,
 * start it again at once, and time the new process from its start to the first message it applies
 * (`consuming`) and to every subscription joined (`ready`), with the phases its log shows on the way.
 * Each restart is measured twice, interleaved R times: with the bus removing the member a dead
 * predecessor left in the group (`evict`, the default) and without (`wait`: ROBUSTRL_KAFKA_EVICT_DEAD_MEMBERS=off,
 * the consumer groups of git main before it). Medians and maxima on stdout (markdown), progress on stderr.
 */
import { localServiceSetting, median, parseIntegerOptions } from './bench-kit';
import { GroupJoin, RestartBench, RestartedService, RestartTiming, StopSignal } from './restart-consume';

const progress = (line: string) => process.stderr.write(`[bench:restart-consume] ${line}\n`);

const { repeats } = parseIntegerOptions(process.argv.slice(2), process.env, 'bench/dist/restart-consume.bench.js', {
  repeats: { env: 'BENCH_REPEATS', fallback: 3, min: 1, placeholder: 'R' },
});

const SERVICES: readonly RestartedService[] = ['detector', 'controller'];
const SIGNALS: readonly StopSignal[] = ['SIGKILL', 'SIGTERM'];
const JOINS: readonly GroupJoin[] = ['wait', 'evict'];

async function main(): Promise<void> {
  const brokers = localServiceSetting('KAFKA_BROKERS', progress).split(',');
  const databaseUrl = localServiceSetting('DATABASE_URL', progress);
  const results = new Map<string, RestartTiming[]>();
  for (const service of SERVICES) {
    const bench = await RestartBench.open(service, brokers, databaseUrl);
    try {
      await bench.start('evict');
      for (let r = 0; r < repeats; r++) {
        for (const join of JOINS) {
          for (const signal of SIGNALS) {
            // A steady state first: the process consuming, its group stable.
            await new Promise((resolve) => setTimeout(resolve, 2_000));
            const timing = await bench.restart(signal, join);
            const key = `${service}\u0000${signal}\u0000${join}`;
            results.set(key, [...(results.get(key) ?? []), timing]);
            progress(`${service} ${label(signal)} ${join} run ${r + 1}/${repeats}: consuming after ${timing.consuming} ms, ready after ${timing.ready} ms`);
          }
        }
      }
    } finally {
      await bench.close();
    }
  }

  const ms = (xs: Array<number | null>) => {
    const known = xs.filter((x): x is number => x !== null);
    return known.length === 0 ? '—' : `${Math.round(median(known))}`;
  };
  const rows: string[] = [];
  for (const service of SERVICES) {
    for (const signal of SIGNALS) {
      for (const join of JOINS) {
        const runs = results.get(`${service}\u0000${signal}\u0000${join}`) ?? [];
        rows.push(
          `| ${service} | ${label(signal)} | ${join === 'wait' ? 'wait (main before)' : 'evict (now)'} | ${ms(runs.map((t) => t.consuming))} | ${Math.max(...runs.map((t) => t.consuming))} | ${ms(runs.map((t) => t.ready))} | ${ms(runs.map((t) => t.nestStarting))} | ${ms(runs.map((t) => t.stateRebuilt))} | ${ms(runs.map((t) => t.subscribed))} |`,
        );
      }
    }
  }
  process.stdout.write(
    [
      `Process start → consuming again, median of ${repeats} restarts each (ms), Node ${process.version}`,
      '',
      '| service | stopped with | dead member | consuming (median) | consuming (max) | ready | Nest starting | state rebuilt | first subscription joined |',
      '|---|---|---|---:|---:|---:|---:|---:|---:|',
      ...rows,
      '',
    ].join('\n'),
  );
}

function label(signal: StopSignal): string {
  return signal === 'SIGKILL' ? 'kill -9' : 'SIGTERM';
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
