import { IncomingHttpHeaders } from 'node:http';
import { MAX_ID_LENGTH, MAX_STORED_INT } from '@robustrl/contracts';

/**
 * Identity headers: which trajectory an OpenAI request belongs to.
 *
 *   x-robustrl-job     required for recording  the job id (also the bus key of the events)
 *   x-robustrl-prompt  required for recording  the prompt id within the batch
 *   x-robustrl-sample  required for recording  the sample index (non-negative integer; GRPO's n-th sample)
 *   x-robustrl-batch   optional                the batch id (default `step-<step>`)
 *   x-robustrl-step    optional                the training step (non-negative integer, default 0)
 *
 * trajectoryId = `<job>/<prompt>/<sample>` (each part URI-encoded, so a `/` inside a part cannot collide).
 *
 * None of the three required headers: the request is proxied with failover but not recorded (evaluation
 * and debugging calls keep working), unless the router requires identity. Some but not all of them, or
 * a malformed number: 400, because that is a caller bug that would silently lose a trajectory.
 */
export const IDENTITY_HEADERS = {
  job: 'x-robustrl-job',
  prompt: 'x-robustrl-prompt',
  sample: 'x-robustrl-sample',
  batch: 'x-robustrl-batch',
  step: 'x-robustrl-step',
} as const;

/** Response header naming the rollout engine that (first) served the request. */
export const ROLLOUT_HEADER = 'x-robustrl-rollout';
/** Response header with the trajectory id the request was recorded under. */
export const TRAJECTORY_HEADER = 'x-robustrl-trajectory';
/** Response header of a 409 TrajectoryRestartedError: why the trajectory restarted from its prompt (policy-restart, prefix-beyond-bound). */
export const RESTARTED_HEADER = 'x-robustrl-restarted';

export interface TrajectoryIdentity {
  trajectoryId: string;
  jobId: string;
  promptId: string;
  sampleIndex: number;
  batchId: string;
  step: number;
}

export type IdentityResult = { ok: true; identity: TrajectoryIdentity | null } | { ok: false; message: string };

export function trajectoryIdOf(jobId: string, promptId: string, sampleIndex: number): string {
  return [jobId, promptId, String(sampleIndex)].map(encodeURIComponent).join('/');
}

export function identityFromHeaders(headers: IncomingHttpHeaders): IdentityResult {
  const header = (name: string): string | undefined => {
    const v = headers[name];
    const s = Array.isArray(v) ? v[0] : v;
    return s === undefined || s.trim() === '' ? undefined : s.trim();
  };
  const job = header(IDENTITY_HEADERS.job);
  const prompt = header(IDENTITY_HEADERS.prompt);
  const sample = header(IDENTITY_HEADERS.sample);
  const present = [job, prompt, sample].filter((v) => v !== undefined).length;
  if (present === 0) return { ok: true, identity: null };
  if (present < 3) {
    const missing = [
      [IDENTITY_HEADERS.job, job],
      [IDENTITY_HEADERS.prompt, prompt],
      [IDENTITY_HEADERS.sample, sample],
    ]
      .filter(([, v]) => v === undefined)
      .map(([n]) => n);
    return { ok: false, message: `trajectory identity is incomplete: missing ${missing.join(', ')}` };
  }
  if ((job as string).length > 200) return { ok: false, message: `${IDENTITY_HEADERS.job} is longer than 200 characters` };
  const batchText = header(IDENTITY_HEADERS.batch);
  const stepText = header(IDENTITY_HEADERS.step);
  // Bounded as the store's columns are (trajectory-api.ts): a value it cannot hold is the caller's 400 here,
  // not a refused write to be asked again.
  for (const [name, value] of [
    [IDENTITY_HEADERS.prompt, prompt],
    [IDENTITY_HEADERS.batch, batchText],
  ] as const) {
    if (value !== undefined && value.length > MAX_ID_LENGTH) return { ok: false, message: `${name} is longer than ${MAX_ID_LENGTH} characters` };
  }
  for (const [name, value] of [
    [IDENTITY_HEADERS.sample, sample],
    [IDENTITY_HEADERS.step, stepText],
  ] as const) {
    if (value !== undefined && (!/^\d+$/.test(value) || Number(value) > MAX_STORED_INT))
      return { ok: false, message: `${name} must be an integer from 0 to ${MAX_STORED_INT}, got '${value.slice(0, 40)}'` };
  }
  const step = stepText === undefined ? 0 : Number(stepText);
  const sampleIndex = Number(sample);
  const trajectoryId = trajectoryIdOf(job as string, prompt as string, sampleIndex);
  if (trajectoryId.length > MAX_ID_LENGTH)
    return {
      ok: false,
      message: `the trajectory id (${IDENTITY_HEADERS.job}/${IDENTITY_HEADERS.prompt}/${IDENTITY_HEADERS.sample}, URI-encoded) is longer than ${MAX_ID_LENGTH} characters`,
    };
  return {
    ok: true,
    identity: {
      trajectoryId,
      jobId: job as string,
      promptId: prompt as string,
      sampleIndex,
      batchId: batchText ?? `step-${step}`,
      step,
    },
  };
}
