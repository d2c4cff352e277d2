import { z } from 'zod';
import { event } from '../define-message';
import { Topics } from '../topics';
import { Step, TrainerEpoch } from './common';

const InstanceId = z.string().min(1);
const Version = z.int().nonnegative();

/** Element sizes of the dtypes a manifest may name (PyTorch's names without `torch.`; robustrl/named_weights.py). */
export const TENSOR_DTYPE_BYTES = {
  float64: 8,
  float32: 4,
  float16: 2,
  bfloat16: 2,
  float8_e4m3fn: 1,
  float8_e5m2: 1,
  int64: 8,
  int32: 4,
  int16: 2,
  int8: 1,
  uint8: 1,
  bool: 1,
} as const;
export const TensorDtype = z.enum(Object.keys(TENSOR_DTYPE_BYTES) as [keyof typeof TENSOR_DTYPE_BYTES, ...(keyof typeof TENSOR_DTYPE_BYTES)[]]);
export type TensorDtype = z.infer<typeof TensorDtype>;

/**
 * One named tensor of a publication (docs/integrators/weights.md: what a manifest holds): where it lies in the
 * publisher's own buckets, so an engine reads it as a view of the bytes the agent put in memory.
 */
export const WeightTensor = z.object({
  name: z.string().min(1).max(500),
  dtype: TensorDtype,
  shape: z.array(z.int().nonnegative()),
  /** Index into THIS publication's buckets (each publisher lays out its own). */
  bucket: z.int().nonnegative(),
  /** Bytes into that bucket. */
  offset: z.int().nonnegative(),
});
export type WeightTensor = z.infer<typeof WeightTensor>;

/** Bytes a tensor takes: its elements times its dtype's size (a 0-d tensor is one element). */
export const tensorBytes = (t: Pick<WeightTensor, 'dtype' | 'shape'>): number => t.shape.reduce((n, d) => n * d, 1) * TENSOR_DTYPE_BYTES[t.dtype];

/** Which of a version's `count` publishers this is (DESIGN "Weights are named and sharded"; one per trainer rank). */
export const WeightShardRef = z.object({ index: z.int().nonnegative(), count: z.int().min(1) });
export type WeightShardRef = z.infer<typeof WeightShardRef>;

/** Absent `shard` is the single publisher every producer before shards was: shard 0 of 1. */
export const SINGLE_SHARD: WeightShardRef = { index: 0, count: 1 };

/**
 * Why a manifest cannot be trusted, or nothing: every tensor inside a bucket that exists, names unique
 * within the publication, the shard inside its count. Shared by the contract and the agent's API (which
 * answers 400 with these before it maps anything).
 */
export function manifestProblems(m: {
  buckets: ReadonlyArray<{ index: number; sizeBytes: number }>;
  tensors?: ReadonlyArray<WeightTensor>;
  shard?: WeightShardRef;
}): Array<{ path: (string | number)[]; message: string }> {
  const problems: Array<{ path: (string | number)[]; message: string }> = [];
  if (m.shard && m.shard.index >= m.shard.count)
    problems.push({ path: ['shard', 'index'], message: `shard ${m.shard.index} of ${m.shard.count}: the index must be below the count` });
  const sizeOf = new Map(m.buckets.map((b) => [b.index, b.sizeBytes]));
  const names = new Set<string>();
  (m.tensors ?? []).forEach((t, i) => {
    const size = sizeOf.get(t.bucket);
    if (size === undefined)
      problems.push({ path: ['tensors', i, 'bucket'], message: `tensor ${t.name}: bucket ${t.bucket} does not exist (${m.buckets.length} buckets)` });
    else if (t.offset + tensorBytes(t) > size)
      problems.push({
        path: ['tensors', i, 'offset'],
        message: `tensor ${t.name}: bytes ${t.offset}..${t.offset + tensorBytes(t)} lie outside bucket ${t.bucket} of ${size} bytes`,
      });
    if (names.has(t.name)) problems.push({ path: ['tensors', i, 'name'], message: `tensor ${t.name} appears twice in the publication` });
    names.add(t.name);
  });
  return problems;
}

export const WeightVersionPublished = event(
  'WeightVersionPublished',
  Topics.weights,
  'A trainer rank published its shard of a weight version: ordered buckets and, optionally, the named tensors in them (paper §5.2.1).',
  z
    .object({
      version: Version,
      step: Step,
      buckets: z.array(z.object({ index: z.int().nonnegative(), sizeBytes: z.int().nonnegative(), checksum: z.string().min(1) })),
      totalBytes: z.int().nonnegative(),
      /**
       * Trainer ranks serving it: `address` is the rank agent's UCX weight server (`host:port`). Where
       * the version lies in its memory (the region's address and remote key) is not here: a weight server
       * tells it only to a puller the registry assigned (docs/integrators/weights.md).
       */
      sources: z.array(z.object({ instanceId: InstanceId, address: z.string().min(1) })),
      /** The named tensors in this publication's buckets; absent: opaque bytes (the engine knows the layout). */
      tensors: z.array(WeightTensor).optional(),
      /**
       * Which shard of the version this publication is: a version is whole once every one of `count`
       * shards is (each publisher lays out and serves its own buckets). Absent: the only one (SINGLE_SHARD).
       */
      shard: WeightShardRef.optional(),
      /**
       * Where records are signed: the publishing machine's role certificate, whose publisher key signed
       * this record, so agents keep manifests from certified trainers only (libs/bus role-certificates.ts).
       */
      publisherCertificate: z.string().min(1).max(200).optional(),
      /**
       * The trainer epoch its publisher was started at (docs/contributors/recovery.md "Fencing"): the registry refuses one older
       * than the newest group it knows of. Absent from older agents: not fenced.
       */
      trainerEpoch: TrainerEpoch.optional(),
    })
    .superRefine((m, ctx) => {
      for (const p of manifestProblems(m)) ctx.addIssue({ code: 'custom', path: p.path, message: p.message });
    }),
);

/** Where weight bytes lie: host memory, or device memory (CUDA). */
const MemoryKind = z.enum(['host', 'cuda', 'cuda-managed']);

/** `shard`: which publication's buckets `bucketIndex` counts in; absent means 0 (a version of one shard). */
const Pull = {
  pullId: z.string().min(1),
  version: Version,
  shard: z.int().nonnegative().optional(),
  bucketIndex: z.int().nonnegative(),
  pullerId: InstanceId,
  sourceId: InstanceId,
};

export const WeightPullAssigned = event(
  'WeightPullAssigned',
  Topics.weights,
  'A puller is to fetch one bucket of one shard from one source; a source serves a bucket to one puller at a time.',
  z.object({
    ...Pull,
    sourceAddress: z.string().min(1).describe("the source's UCX weight server, host:port"),
    /**
     * The digest (publicationDigest) of the shard's publication the registry accepted — a trainer's, by
     * the roster: the puller lays its copy out from the manifest with this digest and verifies the bucket
     * against that manifest's checksum, not against whichever manifest of the version it read last, so a
     * manifest from anyone else under the same version number changes nothing it pulls or loads. Absent
     * from registries before it: the puller falls back to its newest manifest.
     */
    publication: z.string().min(1).optional(),
    /**
     * With identity on (docs/operators/security.md "Who speaks on the bus"): the pull's token sealed for the puller and for
     * the source (libs/bus/src/identity/pull-grants.ts). The puller presents it; the source serves its
     * region only against it. `publicationTag`: the registry's tag over this pull and `publication`, under
     * the puller's key (libs/bus/src/identity/publication-vouchers.ts), so the puller knows the digest is
     * the registry's and not another agent's.
     */
    grant: z.object({ forPuller: z.base64url().min(1), forSource: z.base64url().min(1), publicationTag: z.base64url().min(1).optional() }).optional(),
  }),
);
export const WeightPullCompleted = event(
  'WeightPullCompleted',
  Topics.weights,
  'A bucket arrived and its checksum matched.',
  z.object({
    ...Pull,
    bytes: z.int().nonnegative(),
    durationMs: z.int().nonnegative(),
    /**
     * How it travelled: the memories at both ends, and the protocol UCX chose (null where this UCX
     * cannot tell). `emulated`: device memory at an end copied through a software bounce buffer, about
     * 1000x slower than cuda_ipc's zero-copy — a misconfiguration to fix, reported rather than silent.
     */
    transfer: z
      .object({
        localMemory: MemoryKind,
        sourceMemory: MemoryKind,
        protocol: z.string().max(1000).nullable(),
        emulated: z.boolean(),
        /** Where the pull's time went: moving the bytes (every GET), and verifying them. */
        getMicros: z.int().nonnegative(),
        verifyMicros: z.int().nonnegative(),
      })
      .optional(),
  }),
);
export const WeightPullFailed = event(
  'WeightPullFailed',
  Topics.weights,
  'A bucket pull failed (source died, checksum mismatch); the puller continues from another source.',
  z.object({ ...Pull, reason: z.string().min(1) }),
);
export const RelayJoined = event(
  'RelayJoined',
  Topics.weights,
  'An instance holds a whole version and serves it to others (paper §5.2.1 ➂).',
  z.object({ instanceId: InstanceId, version: Version, address: z.string().min(1) }),
);
export const RelayLeft = event(
  'RelayLeft',
  Topics.weights,
  'An instance stopped serving a version (died, retired, or lent to the trainer).',
  z.object({ instanceId: InstanceId, version: Version, reason: z.string().min(1) }),
);
export const WeightVersionRetired = event(
  'WeightVersionRetired',
  Topics.weights,
  'No live rollout needs this version any longer.',
  z.object({ version: Version }),
);
/**
 * A publication the registry did not make live: its publisher was not one of the job's trainers by the
 * roster (a rollout, a machine that left, or none of the job's) within the grace the registry gives the
 * roster to catch up (docs/operators/security.md "Who speaks on the bus": authority follows the roster). Nobody is assigned a pull of it.
 */
export const WeightPublicationRefused = event(
  'WeightPublicationRefused',
  Topics.weights,
  "The weight registry refused a publication: its publisher is not one of the job's trainers.",
  z.object({
    /** The refused record's event id. */
    publicationId: z.string().min(1),
    version: Version,
    shard: WeightShardRef.optional(),
    /** The machines its sources live on. */
    publishers: z.array(z.string().min(1)).min(1),
    reason: z.string().min(1),
  }),
);
export const TrainerReleased = event(
  'TrainerReleased',
  Topics.weights,
  'The trainer no longer has to serve a version: in async mode once the first relay holds it whole (paper §5.2.1, training resumes), otherwise once every living rollout does.',
  z.object({ version: Version, step: Step, reason: z.enum(['first-relay', 'all-rollouts-hold']) }),
);
