/**
 * `npm run bench:identity` — what signed records cost (README "Who speaks on the bus"), per record,
 * against what a record costs without them, side by side in one run:
 *
 *   node bench/dist/identity.bench.js [--records N] [--runs R]
 *
 * A consumer's side: decoding a telemetry sample (JSON and validation, `decodeMessage`: what every
 * consumer does with every record) vs. decoding it and checking its machine signature
 * (`ControlPlaneVerifier`). A producer's side: encoding vs. encoding and signing (`MachineSigner`).
 * The same records for both; the median of R runs. Progress on stderr, the table (markdown) on stdout.
 */
import { performance } from 'node:perf_hooks';
import { ControlPlaneVerifier, machineKeyOf, MachineSigner } from '@robustrl/bus';
import { createMessage, decodeMessage, encodeMessage, RobustrlMessage, topicOf } from '@robustrl/contracts';
import { median, parseIntegerOptions } from './bench-kit';

const { records, runs } = parseIntegerOptions(process.argv.slice(2), process.env, 'bench/dist/identity.bench.js', {
  records: { env: 'BENCH_RECORDS', fallback: 100_000, min: 1_000, placeholder: 'N' },
  runs: { env: 'BENCH_RUNS', fallback: 5, min: 1, placeholder: 'R' },
});

const secret = 'bench-identity-secret-0123456789abcdefgh';
const machines = Array.from({ length: 1024 }, (_, i) => `rollout-${i}`);
const signers = new Map(machines.map((m) => [m, new MachineSigner(m, machineKeyOf(secret, m))]));
const verifier = new ControlPlaneVerifier(secret);
const at = new Date('2026-11-24T00:00:00.000Z').toISOString();

const messages: RobustrlMessage[] = Array.from({ length: records }, (_, i) => {
  const machineId = machines[i % machines.length];
  return createMessage(
    'RolloutThroughputSampled',
    {
      machineId,
      rolloutId: machineId,
      sampledAt: at,
      windowSeconds: 10,
      tokensPerSecond: 1000 + i,
      completedRequests: i,
      inFlightRequests: 8,
      awaitingTools: 1,
    },
    { jobId: 'bench-job', source: `agent/${machineId}`, occurredAt: at },
  );
});
const wire = messages.map((m) => {
  const value = encodeMessage(m);
  const topic = topicOf(m.type);
  return { topic, key: m.jobId, value, headers: signers.get((m.data as { machineId: string }).machineId)!.sign({ topic, key: m.jobId, value }) };
});

function timed(what: string, body: () => void): number {
  const samples: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    body();
    samples.push(((performance.now() - t0) * 1000) / records);
  }
  const us = median(samples);
  process.stderr.write(`  ${what}: ${us.toFixed(2)} µs per record\n`);
  return us;
}

process.stderr.write(`${records} RolloutThroughputSampled records of ${machines.length} machines (${wire[0].value.length} bytes each), ${runs} runs\n`);
const decode = timed('decode', () => {
  for (const r of wire) if (!decodeMessage(r.value).ok) throw new Error('invalid');
});
const decodeVerify = timed('decode + check the signature', () => {
  for (const r of wire) {
    const d = decodeMessage(r.value);
    if (!d.ok || verifier.verify(r, d.message) !== null) throw new Error('refused');
  }
});
const encode = timed('encode', () => {
  for (const m of messages) encodeMessage(m);
});
const encodeSign = timed('encode + sign', () => {
  for (const m of messages) {
    const value = encodeMessage(m);
    signers.get((m.data as { machineId: string }).machineId)!.sign({ topic: topicOf(m.type), key: m.jobId, value });
  }
});

process.stdout.write(
  [
    '| side | without identity (µs/record) | with identity (µs/record) | added (µs) | × |',
    '|---|---:|---:|---:|---:|',
    `| consumer: decode vs. decode + check | ${decode.toFixed(2)} | ${decodeVerify.toFixed(2)} | ${(decodeVerify - decode).toFixed(2)} | ${(decodeVerify / decode).toFixed(2)} |`,
    `| producer: encode vs. encode + sign | ${encode.toFixed(2)} | ${encodeSign.toFixed(2)} | ${(encodeSign - encode).toFixed(2)} | ${(encodeSign / encode).toFixed(2)} |`,
  ].join('\n') + '\n',
);
