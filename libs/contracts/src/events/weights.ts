import { z } from 'zod';
import { event } from '../define-message';
import { Topics } from '../topics';
import { Step } from './common';

const InstanceId = z.string().min(1);
const Version = z.int().nonnegative();

export const WeightVersionPublished = event(
  'WeightVersionPublished',
  Topics.weights,
  'The trainer published a weight version as a manifest of ordered buckets (paper §5.2.1).',
  z.object({
    version: Version,
    step: Step,
    buckets: z.array(z.object({ index: z.int().nonnegative(), sizeBytes: z.int().nonnegative(), checksum: z.string().min(1) })),
    totalBytes: z.int().nonnegative(),
    /**
     * Trainer ranks serving it: `address` is the rank agent's UCX weight server (`host:port`). Where
     * the version lies in its memory (the region's address and remote key) is not here: a weight server
     * tells it only to a puller the registry assigned (README "Reconnect").
     */
    sources: z.array(z.object({ instanceId: InstanceId, address: z.string().min(1) })),
  }),
);

/** Where weight bytes lie: host memory, or device memory (CUDA). */
const MemoryKind = z.enum(['host', 'cuda', 'cuda-managed']);

const Pull = { pullId: z.string().min(1), version: Version, bucketIndex: z.int().nonnegative(), pullerId: InstanceId, sourceId: InstanceId };

export const WeightPullAssigned = event(
  'WeightPullAssigned',
  Topics.weights,
  'A puller is to fetch one bucket from one source; a source serves a bucket to one puller at a time.',
  z.object({
    ...Pull,
    sourceAddress: z.string().min(1).describe("the source's UCX weight server, host:port"),
    /**
     * With identity on (README "Who speaks on the bus"): the pull's token sealed for the puller and for
     * the source (libs/bus/src/identity/pull-grants.ts). The puller presents it; the source serves its
     * region only against it.
     */
    grant: z.object({ forPuller: z.base64url().min(1), forSource: z.base64url().min(1) }).optional(),
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
export const TrainerReleased = event(
  'TrainerReleased',
  Topics.weights,
  'The trainer no longer has to serve a version: in async mode once the first relay holds it whole (paper §5.2.1, training resumes), otherwise once every living rollout does.',
  z.object({ version: Version, step: Step, reason: z.enum(['first-relay', 'all-rollouts-hold']) }),
);
