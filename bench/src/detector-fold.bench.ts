/**
 * `npm run bench:detector-fold` — what the detector's domain costs per message as a job grows.
 *
 *   node bench/dist/detector-fold.bench.js [--rounds R] [--ticks K]
 *
 * For jobs of 128, 1,024 and 8,192 machines (a quarter trainers in the training phase, the rest
 * rollouts generating), every machine sends a telemetry sample (GpuActivitySampled or
 * RolloutThroughputSampled) every 5 simulated seconds for R rounds, each folded and decided on
 * through the kit's `step` — exactly what the hosts do (smaller jobs run more rounds: at least 40,000
 * samples are timed per size); then K ticks with nothing due. Reports the
 * mean cost of one sample and of one tick, and the ratio 8,192 vs. 128 machines: flat (≈1) means the
 * per-message cost does not grow with the job. Progress on stderr, the table (markdown)
 * on stdout.
 */
import { performance } from 'node:perf_hooks';
import type { Draft, MessageOf } from '@robustrl/contracts';
import { createDetectorDecider, DetectorEvent, DetectorInput, DetectorState } from '@robustrl/detector-domain';
import { observe, step, tick } from '@robustrl/domain-kit';
import { parseIntegerOptions } from './bench-kit';

const { rounds, ticks } = parseIntegerOptions(process.argv.slice(2), process.env, 'bench/dist/detector-fold.bench.js', {
  rounds: { env: 'BENCH_ROUNDS', fallback: 20, min: 2, placeholder: 'R' },
  ticks: { env: 'BENCH_TICKS', fallback: 20_000, min: 1, placeholder: 'K' },
});
const SIZES = [128, 1024, 8192];
const SAMPLE_MS = 5000;
const T0 = Date.parse('2026-11-21T08:00:00.000Z');
const decider = createDetectorDecider();

/** A message as the bus delivers it (validated upstream; built by hand here so that building costs nothing measurable). */
let seq = 0;
function message<T extends DetectorEvent['type']>(type: T, data: unknown, at: number): MessageOf<T> {
  seq += 1;
  return {
    eventId: `00000000-0000-4000-8000-${seq.toString(16).padStart(12, '0')}`,
    type,
    kind: 'event',
    schemaVersion: 1,
    jobId: 'bench-job',
    source: 'bench',
    occurredAt: new Date(at).toISOString(),
    causationId: null,
    correlationId: 'bench',
    data,
  } as unknown as MessageOf<T>;
}
const toEvent = (d: Draft, now: number) => message(d.type as DetectorEvent['type'], d.data, now) as DetectorEvent;

function run(state: DetectorState, input: DetectorInput, now: number): { state: DetectorState; outputs: number } {
  const r = step(decider, state, observe(input, now), (d) => toEvent(d, now));
  return { state: r.state, outputs: r.outputs.length };
}

function machineIds(n: number) {
  return Array.from({ length: n }, (_, i) => (i % 4 === 0 ? `trainer-${i}` : `rollout-${i}`));
}

function sample(id: string, at: number, round: number, i: number): DetectorInput {
  const iso = new Date(at).toISOString();
  if (id.startsWith('trainer'))
    return message('GpuActivitySampled', { machineId: id, sampledAt: iso, intervalSeconds: 5, tensorActive: 0.7, source: 'emulated' }, at);
  return message(
    'RolloutThroughputSampled',
    {
      machineId: id,
      rolloutId: id,
      sampledAt: iso,
      windowSeconds: 5,
      // Every rollout's speed changes every round, so its rank among its peers moves.
      tokensPerSecond: 800 + ((i * 7919 + round * 104729) % 400),
      completedRequests: 3,
      inFlightRequests: 8,
      awaitingTools: i % 10 === 0 ? 8 : 0,
    },
    at,
  );
}

/** One job of `n` machines: mean µs per sample over the timed rounds, and per tick with nothing due. */
function measure(n: number, rounds: number, ticks: number): { samples: number; usPerSample: number; usPerTick: number } {
  const ids = machineIds(n);
  let state = decider.initialState();
  let outputs = 0;
  state = run(state, message('JobStarted', { mode: 'async', resumedFromStep: null, trainerMachines: n / 4, rolloutMachines: (3 * n) / 4 }, T0), T0).state;
  for (const id of ids) {
    const role = id.startsWith('trainer') ? 'trainer' : 'rollout';
    const registered = message(
      'MachineRegistered',
      { machineId: id, role, zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: `${id}:7070`, dpRank: 0 },
      T0,
    );
    state = run(state, registered, T0).state;
    if (role === 'trainer')
      state = run(state, message('RolePhaseChanged', { machineId: id, role, phase: 'training', step: 1, changedAt: new Date(T0).toISOString() }, T0), T0).state;
  }
  // Round 0 warms up (and is not counted); each round's messages are built before it is timed.
  let sampleMs = 0;
  let samples = 0;
  for (let round = 0; round < rounds; round++) {
    const at = T0 + (round + 1) * SAMPLE_MS;
    const batch = ids.map((id, i) => sample(id, at, round, i));
    const t0 = performance.now();
    for (const input of batch) {
      const r = run(state, input, at);
      state = r.state;
      outputs += r.outputs;
    }
    const elapsed = performance.now() - t0;
    if (round > 0) {
      sampleMs += elapsed;
      samples += batch.length;
    }
  }
  // Ticks between two rounds of samples: nothing is due (every window was refreshed by the last round).
  const now = T0 + rounds * SAMPLE_MS + 1000;
  const t0 = performance.now();
  for (let k = 0; k < ticks; k++) outputs += step(decider, state, tick(now), (d) => toEvent(d, now)).outputs.length;
  const tickMs = performance.now() - t0;
  if (outputs !== 0) throw new Error(`a healthy job of ${n} machines led to ${outputs} detector outputs: the bench no longer measures the quiet path`);
  return { samples, usPerSample: (sampleMs * 1000) / samples, usPerTick: (tickMs * 1000) / ticks };
}

// A first, smaller job warms the JIT up, so the smallest size is not charged for compilation.
measure(1024, 5, 1000);
const rows: string[] = [];
const perSample = new Map<number, number>();
const perTick = new Map<number, number>();
for (const n of SIZES) {
  // Small jobs run more rounds, so that every size times at least 40,000 samples.
  const { samples, usPerSample, usPerTick } = measure(n, Math.max(rounds, Math.ceil(40_000 / n) + 1), ticks);
  perSample.set(n, usPerSample);
  perTick.set(n, usPerTick);
  process.stderr.write(`${n} machines: ${samples} samples, ${usPerSample.toFixed(2)} µs each; ${ticks} ticks, ${usPerTick.toFixed(3)} µs each\n`);
  rows.push(`| ${n.toLocaleString('en-US')} | ${samples.toLocaleString('en-US')} | ${usPerSample.toFixed(2)} | ${usPerTick.toFixed(3)} |`);
}
const ratio = (m: Map<number, number>) => (m.get(SIZES[SIZES.length - 1])! / m.get(SIZES[0])!).toFixed(2);
process.stdout.write(
  [
    `Detector fold + decide through \`step\` (in-place state): rounds of one sample per machine (at least ${rounds - 1} timed, at least 40,000 samples), ${ticks.toLocaleString('en-US')} ticks with nothing due, Node ${process.version}`,
    '',
    '| machines | samples timed | µs per sample | µs per tick (nothing due) |',
    '|---|---|---|---|',
    ...rows,
    `| ratio ${SIZES[SIZES.length - 1].toLocaleString('en-US')} vs. ${SIZES[0]} | | ${ratio(perSample)} | ${ratio(perTick)} |`,
    '',
  ].join('\n'),
);
