/**
 * `npm run bench:recovery-latency` — an explicit fault signal published → the controller's
 * command consumed, against a bare kafkajs produce → consume round trip on the same broker in the same run.
 *
 *   node bench/dist/recovery-latency.bench.js [--faults N] [--faults-per-job F] [--gap-ms MS] [--telemetry-ms MS]
 *   (env BENCH_FAULTS, default 100; BENCH_FAULTS_PER_JOB, default 25; BENCH_GAP_MS, default 200;
 *   BENCH_TELEMETRY_MS, default 1000, 0 for jobs that do not report)
 *
 * Set-up (10–20 s; a whole run with the defaults takes about 3 minutes): a Kafka broker and a PostgreSQL server of the run's own on free ports
 * (deploy/local scripts, `chaos/private-infra.ts`; the jars of the shared broker are reused, found through
 * ROBUSTRL_LOCAL_DIR, else `<repo>/.local`), the built detector and controller each as its own process
 * (ROBUSTRL_ORCHESTRATOR=none: the controller decides commands and publishes them, nobody carries them
 * out), and ceil(N / F) synthetic jobs, each with 2 trainers and F + 1 rollouts registered and reporting
 * (GPU activity, rollout throughput) every MS of --telemetry-ms, its first step completed; a machine stops
 * reporting once its fault is signalled.
 *
 * Why the faults do not escalate into task restarts (domain/controller/src/escalation-rules.ts): every
 * fault is a `process-exited` signal on a rollout machine, which the controller answers with a
 * RestartRolloutEngine for that machine (its engine restarts in place: a machine's first fault is within
 * its restart budget; rollout faults never restart the task and never count towards rule 2);
 * rule 1 (a fault in the first iteration) is kept away by each job's TrainingStepCompleted, and each
 * fault hits a machine of its own, since a second fault on a machine whose recovery is still pending
 * would be `covered-by-active-recovery` (report-only, no command). Each job proves the controller has
 * read its first step with a warm-up fault on its spare rollout (F + 1): a job whose warm-up got a
 * RestartTask is dropped for a new one, as that restart would cover all its later faults.
 *
 * Measured: N times, interleaved so the machine's noise hits all alike, (1) one bare round trip —
 * kafkajs producer (idempotent, one request in flight, acks=all, as the bus's) → kafkajs consumer
 * (fresh group), one record of a fault signal's bytes on a topic with the control topic's partition
 * count — then a random pause of 1–2 × MS; (2) one trip through the bare relay chain: the same record
 * produced → a relay process (bare-relay.ts: kafkajs consumer → producer, as configured above) → a
 * second relay process → the bench's consumer, three topics: the recovery path's three broker crossings
 * and two processes with nothing decided, stored or relayed from an outbox (the floor of any design that
 * keeps the detector and the controller as processes on the bus) — then the same pause; (3) one trip
 * through a single bare relay (two crossings, one process: the two round trips the goal counts) and (4)
 * one through a single durable relay (the same, committing one row to the run's PostgreSQL before
 * producing: the least a hop that may neither lose nor repeat an output does; the floor of a design with
 * one deciding service on the path), each followed by the same pause; (5) one fault: an AgentFaultSignalled published through a
 * KafkaBus of its own (as an agent does), and the clock stops when the bench's own kafkajs consumer on
 * the control topic gets the controller's first command for it (matched by job and correlation id, or
 * the machine it names); the next fault waits for it, then the same pause. Faults go round-robin over
 * the jobs. The split of each fault's time uses the envelopes' occurredAt (the services run on this
 * machine's clock): the detector's FaultConfirmed carries the time it began handling the signal, the
 * command the time the controller began handling the verdict.
 *
 * Reports p50/p99/max of each and the ratio p99(fault → command) / (2 × p50(round trip)) — the path is two
 * hops through the broker (signal → detector, verdict → controller) — against the goal of ≤ 3;
 * the same ratio for the bare relay chain, and what robustrl adds over the chain (p50 difference, p99 ratio);
 * the same ratio for the single bare and durable relays; the five slowest faults with their stages.
 * Progress on stderr, markdown on stdout; exits 1 if a fault got no command within 30 s. Ctrl-C (or
 * SIGTERM) stops the services, the clients and both servers and removes their folder; ROBUSTRL_BENCH_KEEP=1
 * keeps the folder (service logs in `<folder>/logs`) after a normal end.
 */
import { median, parseIntegerOptions, percentile } from './bench-kit';
import { FaultSample, RecoveryLatencyResult, RecoveryLatencyRun } from '@robustrl/harness';

const progress = (line: string) => process.stderr.write(`[bench:recovery-latency] ${line}\n`);

const options = parseIntegerOptions(process.argv.slice(2), process.env, 'bench/dist/recovery-latency.bench.js', {
  faults: { env: 'BENCH_FAULTS', fallback: 100, min: 1, placeholder: 'N' },
  'faults-per-job': { env: 'BENCH_FAULTS_PER_JOB', fallback: 25, min: 1, placeholder: 'F' },
  'gap-ms': { env: 'BENCH_GAP_MS', fallback: 200, min: 0, placeholder: 'MS' },
  'telemetry-ms': { env: 'BENCH_TELEMETRY_MS', fallback: 1_000, min: 0, placeholder: 'MS' },
});

/** The goal: p99 of fault → command at most this many times two bare round trips. */
const GOAL_RATIO = 3;

async function main(): Promise<void> {
  const run = new RecoveryLatencyRun({
    faults: options.faults,
    faultsPerJob: options['faults-per-job'],
    trainersPerJob: 2,
    gapMs: options['gap-ms'],
    telemetryMs: options['telemetry-ms'],
    progress,
  });
  const interrupted = (signal: NodeJS.Signals, code: number) => {
    progress(`${signal}: stopping the services, the clients and the private broker and PostgreSQL`);
    void run.close().finally(() => process.exit(code));
  };
  process.once('SIGINT', () => interrupted('SIGINT', 130));
  process.once('SIGTERM', () => interrupted('SIGTERM', 143));
  let result: RecoveryLatencyResult;
  try {
    await run.start();
    progress(`measuring ${options.faults} faults, each after a bare round trip and a trip through the bare relay chain`);
    result = await run.measure();
  } finally {
    await run.close();
  }
  process.stdout.write(`${report(result)}\n`);
  if (result.missed.length > 0) process.exitCode = 1;
}

function report(r: RecoveryLatencyResult): string {
  const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
  const row = (what: string, xs: number[]) =>
    xs.length === 0 ? `| ${what} | 0 | — | — | — |` : `| ${what} | ${xs.length} | ${ms(median(xs))} | ${ms(percentile(xs, 99))} | ${ms(Math.max(...xs))} |`;
  const stage = (pick: (s: FaultSample) => number | null) => r.samples.map(pick).filter((x): x is number => x !== null);
  const totals = r.samples.map((s) => s.totalMs);
  const baseP50 = median(r.baselineMs);
  const ratio = totals.length ? percentile(totals, 99) / (2 * baseP50) : NaN;
  const floorRatio = (xs: number[]) =>
    xs.length ? `${ms(percentile(xs, 99))} / (2 × ${ms(baseP50)}) = ${(percentile(xs, 99) / (2 * baseP50)).toFixed(1)}x` : '—';
  const commands = new Map<string, number>();
  for (const s of r.samples) commands.set(s.command, (commands.get(s.command) ?? 0) + 1);
  return [
    `Recovery latency, ${r.samples.length + r.missed.length} explicit faults over ${r.jobs} job(s), private single-node broker (${r.partitions} partitions a topic) and PostgreSQL on this machine, Node ${process.version}`,
    '',
    '| measure | n | p50 ms | p99 ms | max ms |',
    '|---|---:|---:|---:|---:|',
    row('bare kafkajs produce → consume round trip (baseline)', r.baselineMs),
    row('bare relay chain: produce → relay process → relay process → consume (the path without robustrl)', r.chainMs),
    row('bare relay: produce → one relay process → consume (two crossings)', r.relayMs),
    row('durable relay: produce → one relay process committing a row to PostgreSQL → consume (two crossings)', r.durableRelayMs),
    row('**fault signal published → controller command consumed**', totals),
    row(
      '  signal published → detector handles it',
      stage((s) => s.toDetectorMs),
    ),
    row(
      '  detector handles it → its FaultConfirmed consumed (by the bench)',
      stage((s) => s.detectorToVerdictMs),
    ),
    row(
      '  detector handles it → controller handles the FaultConfirmed',
      stage((s) => s.detectorToControllerMs),
    ),
    row(
      '  controller handles it → its RecoveryDecided consumed (by the bench)',
      stage((s) => s.controllerToDecisionMs),
    ),
    row(
      '  controller handles it → its command consumed',
      stage((s) => s.controllerToConsumedMs),
    ),
    '',
    `p99 / (2 × baseline p50) = ${ms(percentile(totals, 99))} / (2 × ${ms(baseP50)}) = **${ratio.toFixed(1)}x** — goal ≤ ${GOAL_RATIO}x: ${ratio <= GOAL_RATIO ? 'met' : 'NOT met'}`,
    `the bare relay chain alone: p99 / (2 × baseline p50) = ${ms(percentile(r.chainMs, 99))} / (2 × ${ms(baseP50)}) = ${(percentile(r.chainMs, 99) / (2 * baseP50)).toFixed(1)}x; ` +
      `robustrl over the chain: p50 ${ms(median(totals) - median(r.chainMs))} ms more (${(median(totals) / median(r.chainMs)).toFixed(1)}x), p99 ${(percentile(totals, 99) / percentile(r.chainMs, 99)).toFixed(1)}x`,
    `one deciding hop's floor (two crossings, the goal's two round trips): bare relay p99 / (2 × baseline p50) = ${floorRatio(r.relayMs)}; ` +
      `durable relay ${floorRatio(r.durableRelayMs)} (${r.durableRelayRows} rows committed) — a design with one deciding service on the path meets the goal here only if this is ≤ ${GOAL_RATIO}x with room for its deciding`,
    `commands: ${[...commands].map(([type, n]) => `${type} × ${n}`).join(', ') || 'none'}${r.missed.length ? `; NO COMMAND within 30 s for ${r.missed.map((m) => `${m.jobId}/${m.machineId}`).join(', ')}` : ''}`,
    `slowest faults (total: signal → detector, detector → controller, controller → command consumed; ms): ${slowest(r.samples)}`,
    '(indented rows: each stage on its own, from the envelopes’ occurredAt, ms resolution; their p50s and p99s need not add up to the total’s, and two rows may share a start)',
  ].join('\n');
}

/** The five slowest faults with their stages: where a tail comes from (one service's pickup, or the hop after it). */
function slowest(samples: FaultSample[]): string {
  const stage = (x: number | null) => (x === null ? '?' : x.toFixed(0));
  return [...samples]
    .sort((a, b) => b.totalMs - a.totalMs)
    .slice(0, 5)
    .map((s) => `${s.totalMs.toFixed(1)} (${stage(s.toDetectorMs)}, ${stage(s.detectorToControllerMs)}, ${stage(s.controllerToConsumedMs)})`)
    .join('; ');
}

main().catch((err: unknown) => {
  progress(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  process.exit(1);
});
