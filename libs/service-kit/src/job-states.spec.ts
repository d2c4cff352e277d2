import { Logger } from '@nestjs/common';
import { createMessage, Draft, MessageOf } from '@robustrl/contracts';
import { Decider, JobCommand } from '@robustrl/domain-kit';
import { DEFAULT_IDLE_JOB_RETENTION_MS, idleJobRetentionFromEnv, JobStates } from './job-states';

type Step = MessageOf<'TrainingStepCompleted'>;
const counter: Decider<{ steps: number }, JobCommand<Step>, Step, Draft> = {
  initialState: () => ({ steps: 0 }),
  evolve: (s) => ({ steps: s.steps + 1 }),
  decide: () => [],
};
const step = (jobId: string, n: number) =>
  createMessage('TrainingStepCompleted', { step: n, batchId: `b${n}`, durationMs: 1 }, { jobId, source: 'spec', occurredAt: new Date(0).toISOString() });
const quiet = new Logger('job-states.spec');
jest.spyOn(quiet, 'log').mockImplementation(() => undefined);

describe('JobStates: the jobs in memory', () => {
  let now: number;
  const states = (retention: number | null) => new JobStates(counter, retention, () => now, quiet);
  beforeEach(() => {
    now = Date.parse('2026-11-23T00:00:00Z');
  });

  it('folds a message into the job its own state, from a fresh one for a job not in memory', () => {
    const jobs = states(null);
    expect(jobs.stateFor('a')).toEqual({ steps: 0 });
    expect(jobs.has('a')).toBe(false);
    jobs.fold(step('a', 1));
    jobs.fold(step('a', 2));
    jobs.fold(step('b', 1));
    expect(jobs.get('a')).toEqual({ steps: 2 });
    expect(jobs.stateFor('b')).toEqual({ steps: 1 });
    expect(jobs.ids()).toEqual(['a', 'b']);
    expect(jobs.size).toBe(2);
    expect(jobs.codec.decode(jobs.codec.encode(jobs.get('a')!))).toEqual({ steps: 2 });
  });

  it('builds states afresh after a reset while readers still see the ones from before, until they are published', () => {
    const jobs = states(null);
    jobs.fold(step('before', 1));
    jobs.publish();
    jobs.lastActive.set('before', now);
    jobs.dirty.add('before');
    jobs.applied.set('robustrl.training/0', 5n);

    jobs.reset();
    expect([jobs.lastActive.size, jobs.dirty.size, jobs.applied.size, jobs.size]).toEqual([0, 0, 0, 0]);
    jobs.fold(step('after', 1));
    expect(jobs.readableJobs()).toEqual(['before']);
    expect(jobs.readableState('before')).toEqual({ steps: 1 });
    expect(jobs.readableState('after')).toBeUndefined();

    jobs.publish();
    expect(jobs.readableJobs()).toEqual(['after']);
    expect(jobs.readableState('before')).toBeUndefined();
  });

  it('evicts the jobs silent past the retention, writing the changed ones to their snapshot first, and keeps the live ones', async () => {
    const jobs = states(60_000);
    for (const jobId of ['old-written', 'old-changed', 'live']) jobs.fold(step(jobId, 1));
    jobs.lastActive.set('old-written', now - 61_000);
    jobs.lastActive.set('old-changed', now - 90_000);
    jobs.lastActive.set('live', now - 59_000);
    jobs.dirty.add('old-changed');
    jobs.dirty.add('live');
    const snapshotNow = jest.fn(async () => jobs.dirty.clear());

    expect(await jobs.evictIdle(snapshotNow)).toEqual(['old-written', 'old-changed']);
    expect(snapshotNow).toHaveBeenCalledTimes(1);
    expect(jobs.ids()).toEqual(['live']);
    expect([...jobs.lastActive.keys()]).toEqual(['live']);

    // Nothing idle changed since its snapshot: no snapshot is written for the sweep.
    now += 2_000;
    expect(await jobs.evictIdle(snapshotNow)).toEqual(['live']);
    expect(snapshotNow).toHaveBeenCalledTimes(1);
  });

  it('keeps a changed job whose snapshot was not written, and evicts nothing without a retention', async () => {
    const jobs = states(60_000);
    jobs.fold(step('changed', 1));
    jobs.lastActive.set('changed', now - 120_000);
    jobs.dirty.add('changed');
    const skipped = jest.fn(async () => undefined); // e.g. the state is reloading: nothing written
    expect(await jobs.evictIdle(skipped)).toEqual([]);
    expect(skipped).toHaveBeenCalledTimes(1);
    expect(jobs.has('changed')).toBe(true);

    const forever = states(null);
    forever.fold(step('old', 1));
    forever.lastActive.set('old', 0);
    const never = jest.fn(async () => undefined);
    expect(await forever.evictIdle(never)).toEqual([]);
    expect(never).not.toHaveBeenCalled();
    expect(forever.has('old')).toBe(true);
  });

  it('reads its retention in seconds, rounded to milliseconds, and names the variable when refusing one', () => {
    expect(idleJobRetentionFromEnv({ ROBUSTRL_JOB_STATE_RETENTION_SECONDS: '' })).toBe(DEFAULT_IDLE_JOB_RETENTION_MS);
    expect(idleJobRetentionFromEnv({ ROBUSTRL_JOB_STATE_RETENTION_SECONDS: '1.5' })).toBe(1_500);
    expect(() => idleJobRetentionFromEnv({ ROBUSTRL_JOB_STATE_RETENTION_SECONDS: 'an hour' })).toThrow(/ROBUSTRL_JOB_STATE_RETENTION_SECONDS.*'an hour'/);
    expect(() => idleJobRetentionFromEnv({ ROBUSTRL_JOB_STATE_RETENTION_SECONDS: '0' })).toThrow(/positive number of seconds or 'off'/);
  });
});
