import { validateMessage } from '@robustrl/contracts';
import { jobStartedOf, JobStartUsageError } from './job-start';

describe('robustrl job start', () => {
  const now = new Date('2026-11-23T10:00:00Z');

  it('builds the JobStarted of the job: mode, machines, the detection windows given, and a valid envelope', () => {
    const m = jobStartedOf({ job: 'job-7', mode: 'async', trainers: '2', rollouts: '4', agentSilentWindow: '20', probeTimeout: '2.5', resumeGrace: '0' }, now);
    expect(m).toMatchObject({ type: 'JobStarted', jobId: 'job-7', occurredAt: now.toISOString(), source: 'robustrl-cli' });
    expect(m.data).toEqual({
      mode: 'async',
      resumedFromStep: null,
      trainerMachines: 2,
      rolloutMachines: 4,
      detection: { agentSilentWindowSeconds: 20, probeTimeoutSeconds: 2.5, resumeGraceSeconds: 0 },
    });
    expect(validateMessage(m).ok).toBe(true);
    // Defaults: semi-sync, one trainer, no rollouts, the service's windows (no detection block).
    expect(jobStartedOf({ job: 'j' }, now).data).toEqual({ mode: 'semi-sync', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 0 });
    expect(jobStartedOf({ job: 'j', resumedFromStep: '12' }, now).data.resumedFromStep).toBe(12);
  });

  it('one run id, one event id: announcing the same start twice is one event; another run is another', () => {
    const first = jobStartedOf({ job: 'job-7', runId: 'launch-1' }, now);
    expect(jobStartedOf({ job: 'job-7', runId: 'launch-1' }, new Date(now.getTime() + 60_000)).eventId).toBe(first.eventId);
    expect(jobStartedOf({ job: 'job-7', runId: 'launch-2' }, now).eventId).not.toBe(first.eventId);
    expect(jobStartedOf({ job: 'job-8', runId: 'launch-1' }, now).eventId).not.toBe(first.eventId);
  });

  it.each([
    [{}, /--job is required/],
    [{ job: ' ' }, /--job is required/],
    [{ job: 'j', mode: 'fast' }, /--mode must be one of sync, semi-sync, async, got 'fast'/],
    [{ job: 'j', trainers: '-1' }, /--trainers must be a whole number, got '-1'/],
    [{ job: 'j', rollouts: '2.5' }, /--rollouts must be a whole number/],
    [{ job: 'j', resumedFromStep: 'x' }, /--resumed-from-step must be a whole number/],
    [{ job: 'j', agentSilentWindow: '0' }, /--agent-silent-window must be a positive number of seconds, got '0'/],
    [{ job: 'j', resumeGrace: '-3' }, /--resume-grace must be a non-negative number of seconds/],
  ])('refuses %j with a clear reason', (args, reason) => {
    expect(() => jobStartedOf(args, now)).toThrow(JobStartUsageError);
    expect(() => jobStartedOf(args, now)).toThrow(reason);
  });
});
