import { createHash } from 'node:crypto';
import { z } from 'zod';
import { createMessage } from '../create-message';
import { TrainingMode } from '../events/common';
import { DetectionSettings } from '../events/membership';
import type { MessageOf } from '../catalog';

/**
 * How a job announces itself (docs/integrators/job-start.md): what `robustrl job start` publishes and what
 * the controller's `POST /v1/jobs/:jobId/start` takes, so a launcher in any language announces a job
 * without the Node CLI. `runId` names this start of the job: the same job and run id give the same
 * event id, so a launcher that retries announces once.
 */
export const JobStartRequest = z.object({
  mode: TrainingMode.default('semi-sync'),
  trainerMachines: z.int().nonnegative(),
  rolloutMachines: z.int().nonnegative().default(0),
  /** A job resumed from a checkpoint: the step it resumes from. */
  resumedFromStep: z.int().nonnegative().nullable().default(null),
  detection: DetectionSettings.optional(),
  runId: z.string().trim().min(1).max(200),
});
export type JobStartRequest = z.infer<typeof JobStartRequest>;

/** A job id as the agents report it (ROBUSTRL_JOB_ID): non-empty, no white space or control characters. */
export const JobIdText = z
  .string()
  .min(1)
  .max(200)
  .refine((s) => ![...s].some((c) => c.trim() === '' || c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f), 'no white space or control characters');

/** The JobStarted of `request` for `jobId`; pure: the same input gives the same message (its id from job and run id). */
export function jobStartedMessage(jobId: string, request: JobStartRequest, now: Date, source: string): MessageOf<'JobStarted'> {
  const { runId, detection, ...rest } = request;
  return createMessage(
    'JobStarted',
    { ...rest, ...(detection && Object.keys(detection).length > 0 ? { detection } : {}) },
    {
      jobId,
      source,
      occurredAt: now.toISOString(),
      eventId: nameBasedUuid(`job-start\n${jobId}\n${runId}`),
    },
  );
}

/** A UUID derived from a name (version 5 layout over SHA-256): the same name, the same id. */
export function nameBasedUuid(name: string): string {
  const b = createHash('sha256').update(name).digest().subarray(0, 16);
  b[6] = (b[6] & 0x0f) | 0x50;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
