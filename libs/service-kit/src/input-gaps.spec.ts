import { Logger } from '@nestjs/common';
import { BusHealth } from '@robustrl/bus';
import { createMessage, draft, Draft } from '@robustrl/contracts';
import { InputGapHandling } from './deciding-types';
import { InputGaps } from './input-gaps';

const GROUP = 'robustrl-detector';
const T = Date.parse('2026-11-23T00:00:00Z');
const healthy: BusHealth = { reachable: true, subscriptions: [{ groupId: GROUP, running: true, lag: 0, restarts: 0 }] };
const handling: InputGapHandling = {
  lagToleranceMs: 10_000,
  paused: (gap) => draft('DetectionPaused', { reason: gap.reason, blindSince: new Date(gap.since).toISOString(), detail: gap.detail }),
  resumed: (gap, at) =>
    draft('DetectionResumed', {
      reason: gap.reason,
      blindSince: new Date(gap.since).toISOString(),
      resumedAt: new Date(at).toISOString(),
      blindMs: at - gap.since,
    }),
};

/** Input gaps over fake parts: the jobs in memory, the bus's health and what was recorded are the test's. */
function gapsOf(watch: InputGapHandling | undefined) {
  const parts = {
    now: T,
    jobIds: ['a', 'b'],
    stale: false,
    health: async (): Promise<BusHealth> => healthy,
    recorded: [] as Array<{ jobId: string; type: string; cause: string }>,
    failFor: new Set<string>(),
  };
  const warn = jest.fn();
  const logger = Object.assign(new Logger('input-gaps.spec'), { warn, log: jest.fn(), error: jest.fn() });
  const gaps = new InputGaps({
    handling: watch,
    bus: { health: () => parts.health() },
    groupId: GROUP,
    jobs: {
      get size() {
        return parts.jobIds.length;
      },
      ids: () => [...parts.jobIds],
    },
    reloads: {
      get stale() {
        return parts.stale;
      },
    },
    isStopped: () => false,
    record: async (jobId: string, input: Draft, cause: string) => {
      if (parts.failFor.has(jobId)) throw new Error('connect ECONNREFUSED');
      parts.recorded.push({ jobId, type: input.type, cause });
    },
    inTurn: (work) => work(),
    clock: () => parts.now,
    logger,
  });
  return { gaps, parts, warn };
}

describe('InputGaps: a deciding consumer watching its own input', () => {
  it('without handling watches nothing, yet tracks the newest input, capped at now', async () => {
    const { gaps, parts } = gapsOf(undefined);
    gaps.watch();
    expect(gaps.watched).toBe(false);
    expect(gaps.current).toBeNull();
    const at = (ms: number) =>
      createMessage('TrainingStepCompleted', { step: 1, batchId: 'b', durationMs: 1 }, { jobId: 'a', source: 'spec', occurredAt: new Date(ms).toISOString() });
    gaps.noteInput(at(T - 5_000));
    gaps.noteInput(at(T - 9_000)); // older: no change
    expect(gaps.newestInputAt).toBe(T - 5_000);
    gaps.noteInput(at(T + 60_000)); // a producer's clock ahead
    expect(gaps.newestInputAt).toBe(T);
    await gaps.sample();
    expect(parts.recorded).toEqual([]);
    expect(gaps.dueFor('a')).toBe(false);
  });

  it('starts blind from the newest input before the restart, and records a pause for every job once', async () => {
    const { gaps, parts } = gapsOf(handling);
    gaps.newestInputAt = T - 30_000;
    gaps.watch();
    expect(gaps.current).toEqual(expect.objectContaining({ reason: 'consumer-restart', since: T - 30_000 }));
    expect(gaps.dueFor('a')).toBe(true);
    await gaps.recordGap();
    await gaps.recordGap();
    expect(parts.recorded).toEqual([
      { jobId: 'a', type: 'DetectionPaused', cause: `paused/${T - 30_000}` },
      { jobId: 'b', type: 'DetectionPaused', cause: `paused/${T - 30_000}` },
    ]);
    expect(gaps.dueFor('a')).toBe(false);
    // A job that first speaks during the gap is due its pause.
    expect(gaps.dueFor('new')).toBe(true);
  });

  it('when the gap closes records a resume for every job; one that fails stays pending, blind, and is retried once per warning', async () => {
    const { gaps, parts, warn } = gapsOf(handling);
    gaps.watch();
    await gaps.recordGap();
    parts.recorded.length = 0;
    parts.failFor.add('b');
    parts.now = T + 5_000;
    await gaps.sample();
    expect(gaps.current).toBeNull();
    expect(parts.recorded).toEqual([{ jobId: 'a', type: 'DetectionResumed', cause: `resumed/${T}` }]);
    expect(gaps.resumePending('a')).toBe(false);
    expect(gaps.resumePending('b')).toBe(true);
    expect(gaps.dueFor('b')).toBe(true);
    await gaps.recordGap();
    expect(warn).toHaveBeenCalledTimes(1);

    parts.failFor.clear();
    await gaps.recordGap();
    expect(parts.recorded.map((r) => `${r.jobId} ${r.type}`)).toEqual(['a DetectionResumed', 'b DetectionResumed']);
    expect(gaps.resumePending('b')).toBe(false);
  });

  it('a broker that does not answer opens a gap from the last healthy sample; nothing is recorded while the state reloads', async () => {
    const { gaps, parts } = gapsOf(handling);
    gaps.watch();
    parts.now = T + 1_000;
    await gaps.sample(); // caught up: the restart gap closes
    parts.recorded.length = 0;
    parts.health = () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:9092'));
    parts.stale = true;
    parts.now = T + 2_000;
    await gaps.sample();
    expect(gaps.current).toEqual({ reason: 'broker-unreachable', since: T + 1_000, detail: 'Error: connect ECONNREFUSED 127.0.0.1:9092' });
    expect(parts.recorded).toEqual([]);

    parts.stale = false;
    await gaps.recordGap();
    expect(parts.recorded.map((r) => r.cause)).toEqual([`paused/${T + 1_000}`, `paused/${T + 1_000}`]);
  });
});
