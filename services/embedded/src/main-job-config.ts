import { custom, number, seconds, text } from '@robustrl/config';

/** What `npm start`, the main job, reads from its environment (docs/main-job.md). */
const owner = 'main job';
const positive = (name: string, meaning: string, fallback: number) => number(name, { owner, meaning, default: fallback, above: 0 });
export const SPEEDUP = positive('ROBUSTRL_SPEEDUP', 'scaled time: job seconds per real second', 120);
export const STEPS = positive('ROBUSTRL_STEPS', 'training steps of the job', 8);
export const SEED = positive('ROBUSTRL_SEED', 'the seed of its faults and workload', 1);
export const TIMEOUT = seconds('ROBUSTRL_TIMEOUT_SECONDS', { owner, meaning: 'give up after this many real seconds', default: 600 });
export const JOB_ID = text('ROBUSTRL_JOB_ID', { owner, meaning: 'the job id', default: undefined, defaultText: '`job-<timestamp>`' });
// `1`, as before the registry: a developer's switch, not an operator's setting.
export const VERBOSE = custom('ROBUSTRL_VERBOSE', {
  owner,
  meaning: "`1`: show the services' own logs",
  default: false,
  defaultText: 'unset: errors only',
  accepted: '1 or 0',
  parse: (raw) => (raw === '1' ? true : raw === '0' ? false : undefined),
});
