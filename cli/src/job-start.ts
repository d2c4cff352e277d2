import { DetectionSettings, jobStartedMessage, MessageOf, TrainingMode } from '@robustrl/contracts';

/** `robustrl job start` as given on the command line (strings, as commander hands them over). */
export interface JobStartArgs {
  job?: string;
  mode?: string;
  trainers?: string;
  rollouts?: string;
  resumedFromStep?: string;
  /** A name for this start of the job: the same run id publishes the same event id, so running the command twice announces once. */
  runId?: string;
  trainerIdleWindow?: string;
  rolloutSilentWindow?: string;
  agentSilentWindow?: string;
  probeTimeout?: string;
  resumeGrace?: string;
}

/** A mistake in the arguments: the message says which and what was expected. */
export class JobStartUsageError extends Error {
  override name = 'JobStartUsageError';
}

/**
 * The JobStarted a job announces itself with (membership topic): what the controller's escalation rules
 * (rule 1: a fault in the first iteration) and the detector's per-job windows start from. Pure: the
 * same arguments and `now` give the same message; the event id derives from the job and the run id.
 */
export function jobStartedOf(args: JobStartArgs, now: Date): MessageOf<'JobStarted'> {
  const job = args.job?.trim();
  if (!job) throw new JobStartUsageError('--job is required: the id the job reports under (its agents use the same ROBUSTRL_JOB_ID)');
  const mode = TrainingMode.safeParse(args.mode ?? 'semi-sync');
  if (!mode.success) throw new JobStartUsageError(`--mode must be one of ${TrainingMode.options.join(', ')}, got '${args.mode}'`);
  const detection: DetectionSettings = {};
  const windows: Array<[keyof JobStartArgs, keyof DetectionSettings]> = [
    ['trainerIdleWindow', 'trainerIdleWindowSeconds'],
    ['rolloutSilentWindow', 'rolloutSilentWindowSeconds'],
    ['agentSilentWindow', 'agentSilentWindowSeconds'],
    ['probeTimeout', 'probeTimeoutSeconds'],
  ];
  for (const [flag, field] of windows) {
    if (args[flag] !== undefined) (detection as Record<string, number>)[field] = seconds(flag, args[flag], { positive: true });
  }
  if (args.resumeGrace !== undefined) detection.resumeGraceSeconds = seconds('resumeGrace', args.resumeGrace, { positive: false });
  const request = {
    mode: mode.data,
    resumedFromStep: args.resumedFromStep === undefined ? null : count('resumedFromStep', args.resumedFromStep),
    trainerMachines: count('trainers', args.trainers ?? '1'),
    rolloutMachines: count('rollouts', args.rollouts ?? '0'),
    detection,
    runId: args.runId?.trim() || now.toISOString(),
  };
  return jobStartedMessage(job, request, now, 'robustrl-cli');
}

function flagOf(name: keyof JobStartArgs): string {
  return `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

function count(name: keyof JobStartArgs, text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(n)) throw new JobStartUsageError(`${flagOf(name)} must be a whole number, got '${text}'`);
  return n;
}

function seconds(name: keyof JobStartArgs, text: string | undefined, o: { positive: boolean }): number {
  const n = Number(text);
  if (text === undefined || text.trim() === '' || !Number.isFinite(n) || n < 0 || (o.positive && n === 0)) {
    throw new JobStartUsageError(`${flagOf(name)} must be a ${o.positive ? 'positive' : 'non-negative'} number of seconds, got '${text}'`);
  }
  return n;
}
