/**
 * `npm run bench:identity` — what signed records cost (docs/operators/security.md "Who speaks on the bus"), per record,
 * against what a record costs without them, side by side in one run:
 *
 *   node bench/dist/identity.bench.js [--records N] [--runs R]
 *
 * A consumer's side: decoding a telemetry sample (JSON and validation, `decodeMessage`: what every
 * consumer does with every record) vs. decoding it and checking its machine signature
 * (`ControlPlaneVerifier`). A producer's side: encoding vs. encoding and signing (`MachineSigner`).
 * Pull grants (libs/bus/src/identity/pull-grants.ts): the registry encoding a WeightPullAssigned vs.
 * sealing its grant and encoding it, and the puller and the source opening their copies vs. decoding it.
 * Manifests (role-certificates.ts): a trainer encoding and HMAC-signing a WeightVersionPublished of 64
 * buckets vs. also signing it with its publisher key; an agent decoding it vs. decoding it and checking
 * its role certificate and publisher signature (two Ed25519 verifications) — one manifest per shard and
 * version, so over a tenth as many records.
 * The same records for both; the median of R runs. Progress on stderr, the table (markdown) on stdout.
 */
import { performance } from 'node:perf_hooks';
import {
  AgentCommandVerifier,
  controllerKeyPairOf,
  controlPlaneRecordKeyPairOf,
  ControlPlaneVerifier,
  machineKeyOf,
  MachineSigner,
  PullGrantOpener,
  PullGrantSealer,
  roleCertificateOf,
} from '@robustrl/bus';
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

function timed(what: string, body: () => void, count = records): number {
  const samples: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    body();
    samples.push(((performance.now() - t0) * 1000) / count);
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

// Pull grants: one assignment per record, a version of 64 buckets pulled by each machine in turn from one
// source (the trainer): a grant is sealed (and opened) once per puller, version and source, and its
// other 63 buckets carry the same one. Versions go up so that no grant repeats across pullers' rounds.
const BUCKETS_PER_VERSION = 64;
const assignments = Array.from({ length: records }, (_, i) => {
  const round = Math.floor(i / BUCKETS_PER_VERSION);
  const pullerId = machines[round % machines.length];
  const version = 7 + Math.floor(round / machines.length);
  return {
    pullId: `w${version}/b${i % BUCKETS_PER_VERSION}/${pullerId}`,
    version,
    bucketIndex: i % BUCKETS_PER_VERSION,
    pullerId,
    sourceId: 'trainer-0',
    sourceAddress: '10.0.0.1:13337',
  };
});
const assign = (data: (typeof assignments)[number] & { grant?: unknown }) =>
  createMessage('WeightPullAssigned', data as never, { jobId: 'bench-job', source: 'weight-registry', occurredAt: at });
const encodeAssignment = timed('encode an assignment', () => {
  for (const a of assignments) encodeMessage(assign(a));
});
// As the registry and the agents hold them (one sealer, one opener per machine), new for every run: what
// a run measures is each grant sealed once and found again for its version's other buckets.
const sealEncode = timed('seal its grant + encode', () => {
  const sealer = new PullGrantSealer(secret);
  for (const a of assignments) encodeMessage(assign({ ...a, grant: sealer.seal(a) }));
});
const sealer = new PullGrantSealer(secret);
const granted = assignments.map((a) => ({ ...a, grant: sealer.seal(a) }));
const grantedWire = granted.map((a) => encodeMessage(assign(a)));
const pullerKeys = new Map(machines.map((m) => [m, machineKeyOf(secret, m)]));
const trainerKey = machineKeyOf(secret, 'trainer-0');
const decodeAssignment = timed('decode an assignment', () => {
  for (const w of grantedWire) if (!decodeMessage(w).ok) throw new Error('invalid');
});
const decodeOpen = timed('decode + open both copies (puller and source)', () => {
  const pullers = new Map(machines.map((m) => [m, new PullGrantOpener(pullerKeys.get(m)!)]));
  const trainer = new PullGrantOpener(trainerKey);
  for (let i = 0; i < grantedWire.length; i++) {
    const d = decodeMessage(grantedWire[i]);
    const a = granted[i];
    if (!d.ok || !pullers.get(a.pullerId)!.open('puller', a, a.grant.forPuller) || !trainer.open('source', a, a.grant.forSource)) throw new Error('refused');
  }
});

// Manifests: what a trainer publishes per shard and version, and what every agent checks before keeping one.
const MANIFESTS = Math.max(100, Math.floor(records / 10));
const publisherCertificate = roleCertificateOf(secret, 'trainer-0', 'trainer');
const trainerSigner = new MachineSigner('trainer-0', trainerKey);
const manifests = Array.from({ length: MANIFESTS }, (_, i) =>
  createMessage(
    'WeightVersionPublished',
    {
      version: i + 1,
      step: i + 1,
      buckets: Array.from({ length: BUCKETS_PER_VERSION }, (_, b) => ({
        index: b,
        sizeBytes: 1 << 26,
        checksum: `xxh64:${(b * 7919 + i).toString(16).padStart(16, '0')}`,
      })),
      totalBytes: BUCKETS_PER_VERSION << 26,
      sources: [{ instanceId: 'trainer-0', address: '10.0.0.1:13337' }],
      publisherCertificate,
    },
    { jobId: 'bench-job', source: 'agent/trainer-0', occurredAt: at },
  ),
);
const hmacOnly = new MachineSigner('trainer-0', trainerKey);
const encodeManifest = timed(
  'encode a manifest + HMAC-sign it (as before publisher keys)',
  () => {
    for (const m of manifests) {
      const value = encodeMessage(m);
      // A record type the publisher key does not sign: the HMAC alone.
      hmacOnly.sign({ topic: topicOf(m.type), key: m.jobId, value }, { ...m, type: 'GpuActivitySampled' } as unknown as RobustrlMessage);
    }
  },
  MANIFESTS,
);
const encodeManifestSigned = timed(
  'encode a manifest + sign it (HMAC and publisher key)',
  () => {
    for (const m of manifests) {
      const value = encodeMessage(m);
      trainerSigner.sign({ topic: topicOf(m.type), key: m.jobId, value }, m);
    }
  },
  MANIFESTS,
);
const manifestWire = manifests.map((m) => {
  const value = encodeMessage(m);
  const topic = topicOf(m.type);
  return { topic, key: m.jobId, value, headers: trainerSigner.sign({ topic, key: m.jobId, value }, m) };
});
const agentVerifier = new AgentCommandVerifier(controllerKeyPairOf(secret).publicKey, controlPlaneRecordKeyPairOf(secret).publicKey);
const decodeManifest = timed(
  'decode a manifest',
  () => {
    for (const r of manifestWire) if (!decodeMessage(r.value).ok) throw new Error('invalid');
  },
  MANIFESTS,
);
const decodeCheckManifest = timed(
  "decode a manifest + check its trainer's certificate and signature",
  () => {
    for (const r of manifestWire) {
      const d = decodeMessage(r.value);
      if (!d.ok || agentVerifier.verify(r, d.message) !== null) throw new Error('refused');
    }
  },
  MANIFESTS,
);

process.stdout.write(
  [
    '| side | without identity (µs/record) | with identity (µs/record) | added (µs) | × |',
    '|---|---:|---:|---:|---:|',
    `| consumer: decode vs. decode + check | ${decode.toFixed(2)} | ${decodeVerify.toFixed(2)} | ${(decodeVerify - decode).toFixed(2)} | ${(decodeVerify / decode).toFixed(2)} |`,
    `| producer: encode vs. encode + sign | ${encode.toFixed(2)} | ${encodeSign.toFixed(2)} | ${(encodeSign - encode).toFixed(2)} | ${(encodeSign / encode).toFixed(2)} |`,
    `| registry: encode an assignment vs. seal its grant + encode | ${encodeAssignment.toFixed(2)} | ${sealEncode.toFixed(2)} | ${(sealEncode - encodeAssignment).toFixed(2)} | ${(sealEncode / encodeAssignment).toFixed(2)} |`,
    `| agents: decode an assignment vs. decode + open the puller's and the source's copies | ${decodeAssignment.toFixed(2)} | ${decodeOpen.toFixed(2)} | ${(decodeOpen - decodeAssignment).toFixed(2)} | ${(decodeOpen / decodeAssignment).toFixed(2)} |`,
    `| trainer: encode + HMAC-sign a manifest of 64 buckets vs. also its publisher signature | ${encodeManifest.toFixed(2)} | ${encodeManifestSigned.toFixed(2)} | ${(encodeManifestSigned - encodeManifest).toFixed(2)} | ${(encodeManifestSigned / encodeManifest).toFixed(2)} |`,
    `| agents: decode a manifest vs. decode + check its certificate and publisher signature | ${decodeManifest.toFixed(2)} | ${decodeCheckManifest.toFixed(2)} | ${(decodeCheckManifest - decodeManifest).toFixed(2)} | ${(decodeCheckManifest / decodeManifest).toFixed(2)} |`,
  ].join('\n') + '\n',
);
