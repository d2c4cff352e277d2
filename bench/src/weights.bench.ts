/**
 * `npm run bench:weights` — weight transfer benchmarks.
 *
 *   node bench/dist/weights.bench.js [--size-mib M] [--iterations N] [--warmup W] [--rounds R] [--transports shm,tcp] [--json]
 *   (env fallbacks: BENCH_SIZE_MIB, BENCH_ITERATIONS, BENCH_WARMUP, BENCH_ROUNDS, BENCH_TRANSPORTS; BENCH_UCX_PERFTEST = path
 *   of ucx_perftest, default: on PATH; UCX_* variables apply to the module and ucx_perftest alike)
 *
 * Part 1 (weights-link.ts): single-link pull throughput of @robustrl/ucx (endpoint.get, M MiB per GET) on
 * each transport, side by side with ucx_perftest (ucp_get, same UCX_TLS, size and iteration counts) and
 * plain memcpy, in R interleaved rounds, reported as paired ratios.
 * Part 2 (weights-bringup.ts): time to bring N = 1, 2, 4, 8 rollout agents (separate processes, real broker, the
 * weight registry, UCX over tcp) to a new version, with relays and with every rollout pulling from the trainer.
 *   [--rollouts 1,2,4,8] [--buckets B] [--bucket-mib S] [--link-mib-per-s L] [--skip-bring-up]
 *   (env: BENCH_ROLLOUTS, BENCH_BUCKETS (4), BENCH_BUCKET_MIB (32), BENCH_LINK_MIB_PER_S (128; 0 = unpaced);
 *   KAFKA_BROKERS / DATABASE_URL, else the local services are started)
 *
 * Progress goes to stderr; the result tables (markdown), or with --json one JSON object, to stdout.
 */
import { localServiceSetting, parseIntegerOptions } from './bench-kit';
import { BringUpResult, formatBringUp, measureBringUp } from './weights-bringup';
import { formatSingleLink, isLinkTransport, LINK_TRANSPORTS, LinkResult, LinkTransport, measureSingleLink } from './weights-link';

const SCRIPT = 'bench/dist/weights.bench.js';
const progress = (line: string) => process.stderr.write(`[bench:weights] ${line}\n`);

interface Options {
  sizeMib: number;
  iterations: number;
  warmup: number;
  rounds: number;
  transports: LinkTransport[];
  json: boolean;
  rollouts: number[];
  buckets: number;
  bucketMib: number;
  linkMibPerS: number;
  skipBringUp: boolean;
}

const USAGE =
  `usage: node ${SCRIPT} [--size-mib M] [--iterations N] [--warmup W] [--rounds R] [--transports ${Object.keys(LINK_TRANSPORTS).join(',')}] [--json]\n` +
  '       [--rollouts 1,2,4,8] [--buckets B] [--bucket-mib S] [--link-mib-per-s L] [--skip-bring-up]\n' +
  '  env fallbacks: BENCH_SIZE_MIB (64), BENCH_ITERATIONS (30), BENCH_WARMUP (3), BENCH_ROUNDS (5), BENCH_TRANSPORTS (shm,tcp), BENCH_UCX_PERFTEST (ucx_perftest); UCX_* apply to both sides\n' +
  '                 BENCH_ROLLOUTS (1,2,4,8), BENCH_BUCKETS (4), BENCH_BUCKET_MIB (32), BENCH_LINK_MIB_PER_S (128, 0 = unpaced)\n';

function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv): Options {
  // --transports and --json are not integers: take them out, leave the rest to bench-kit.
  const rest: string[] = [];
  let transportsArg: string | undefined;
  let json = false;
  let rolloutsArg: string | undefined;
  let skipBringUp = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') {
      process.stdout.write(USAGE);
      process.exit(0);
    } else if (arg === '--json') json = true;
    else if (arg === '--transports') {
      transportsArg = argv[++i];
      if (transportsArg === undefined) throw new Error('--transports needs a value');
    } else if (arg.startsWith('--transports=')) transportsArg = arg.slice('--transports='.length);
    else if (arg === '--rollouts') {
      rolloutsArg = argv[++i];
      if (rolloutsArg === undefined) throw new Error('--rollouts needs a value');
    } else if (arg.startsWith('--rollouts=')) rolloutsArg = arg.slice('--rollouts='.length);
    else if (arg === '--skip-bring-up') skipBringUp = true;
    else rest.push(arg);
  }
  const ints = parseIntegerOptions(rest, env, SCRIPT, {
    'size-mib': { env: 'BENCH_SIZE_MIB', fallback: 64, min: 1, placeholder: 'M' },
    iterations: { env: 'BENCH_ITERATIONS', fallback: 30, min: 1, placeholder: 'N' },
    warmup: { env: 'BENCH_WARMUP', fallback: 3, min: 0, placeholder: 'W' },
    rounds: { env: 'BENCH_ROUNDS', fallback: 5, min: 1, placeholder: 'R' },
    buckets: { env: 'BENCH_BUCKETS', fallback: 4, min: 1, placeholder: 'B' },
    'bucket-mib': { env: 'BENCH_BUCKET_MIB', fallback: 32, min: 1, placeholder: 'S' },
    'link-mib-per-s': { env: 'BENCH_LINK_MIB_PER_S', fallback: 128, min: 0, placeholder: 'L' },
  });
  const rollouts = (rolloutsArg ?? env.BENCH_ROLLOUTS ?? '1,2,4,8').split(',').map((x) => Number(x.trim()));
  if (!rollouts.length || rollouts.some((n) => !Number.isInteger(n) || n < 1))
    throw new Error(`--rollouts (or BENCH_ROLLOUTS) must list whole numbers ≥ 1, got '${rolloutsArg ?? env.BENCH_ROLLOUTS}'`);
  const list = (transportsArg ?? env.BENCH_TRANSPORTS ?? 'shm,tcp')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = list.filter((t) => !isLinkTransport(t));
  if (list.length === 0 || bad.length > 0) {
    throw new Error(`--transports (or BENCH_TRANSPORTS) must list ${Object.keys(LINK_TRANSPORTS).join(', ')}; got '${bad.join(',') || transportsArg}'`);
  }
  return {
    sizeMib: ints['size-mib'],
    iterations: ints.iterations,
    warmup: ints.warmup,
    rounds: ints.rounds,
    transports: [...new Set(list)] as LinkTransport[],
    json,
    rollouts,
    buckets: ints.buckets,
    bucketMib: ints['bucket-mib'],
    linkMibPerS: ints['link-mib-per-s'],
    skipBringUp,
  };
}

async function main(): Promise<void> {
  const opts = parseOptions(process.argv.slice(2), process.env);
  // Exit through process.exit on Ctrl-C / SIGTERM, so the measurements' 'exit' hooks stop their child processes.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
  const report: { node: string; singleLink: LinkResult[]; bringUp: BringUpResult[] } = { node: process.version, singleLink: [], bringUp: [] };
  const sections: string[] = [];

  // ---- Part 1: single-link pull throughput (module vs ucx_perftest vs memcpy) ----
  report.singleLink = await measureSingleLink({
    sizeBytes: opts.sizeMib * 1024 * 1024,
    iterations: opts.iterations,
    warmup: opts.warmup,
    rounds: opts.rounds,
    transports: opts.transports,
    progress,
  });
  sections.push(`## Single link\n\n${formatSingleLink(report.singleLink)}`);

  // ---- Part 2: bring-up time of N rollout agents to a new weight version, relays vs trainer only ----
  if (!opts.skipBringUp) {
    const bringUp = {
      brokers: localServiceSetting('KAFKA_BROKERS', progress).split(','),
      databaseUrl: localServiceSetting('DATABASE_URL', progress),
      rolloutCounts: opts.rollouts,
      buckets: opts.buckets,
      bucketMiB: opts.bucketMib,
      linkMiBPerSecond: opts.linkMibPerS,
      progress,
    };
    report.bringUp = await measureBringUp(bringUp);
    sections.push(`\n## Bring-up\n\n${formatBringUp(report.bringUp, bringUp)}\n`);
  }

  process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${sections.join('\n')}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`[bench:weights] FAILED: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
