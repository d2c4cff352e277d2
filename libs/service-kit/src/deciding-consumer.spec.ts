import { InProcessBus } from '@robustrl/bus';
import { createMessage, Draft, MessageOf, Topics } from '@robustrl/contracts';
import { Decider, JobCommand } from '@robustrl/domain-kit';
import { EventStore } from '@robustrl/store';
import { eventually } from '@robustrl/testing/eventually';
import { DecidingConsumer, idleJobRetentionFromEnv } from './deciding-consumer';

type Step = MessageOf<'TrainingStepCompleted'>;
/** Counts a job's completed steps: enough state to see whether it survived eviction. */
const counter: Decider<{ steps: number }, JobCommand<Step>, Step, Draft> = {
  initialState: () => ({ steps: 0 }),
  evolve: (s) => ({ steps: s.steps + 1 }),
  decide: () => [],
};

describe('DecidingConsumer: bounded state', () => {
  let bus: InProcessBus;
  let store: EventStore;
  let now: number;
  let consumer: DecidingConsumer<{ steps: number }, Step>;
  /** The counter behind a deciding consumer with a 60 s retention, on virtual time. */
  const counterConsumer = () =>
    new DecidingConsumer(bus, store, {
      consumer: 'counter',
      topics: [Topics.training],
      inputTypes: ['TrainingStepCompleted'],
      decider: counter,
      tickIntervalMs: null,
      clock: () => now,
      idleJobRetentionMs: 60_000,
    });
  const step = (jobId: string, n: number) =>
    createMessage('TrainingStepCompleted', { step: n, batchId: `b${n}`, durationMs: 1 }, { jobId, source: 'spec', occurredAt: new Date(now).toISOString() });

  beforeEach(async () => {
    now = Date.parse('2026-11-23T00:00:00Z');
    bus = new InProcessBus();
    store = await EventStore.open({ kind: 'pglite' });
    consumer = counterConsumer();
    await consumer.start();
  });
  afterEach(async () => {
    await consumer.stop();
    await bus.close();
    await store.close();
  });

  it('evicts a job silent past the retention, keeps a live one, and restores the evicted one from the inbox when it speaks again', async () => {
    await bus.publish([step('done', 1), step('done', 2), step('live', 1)]);
    await eventually('three steps applied', () => (consumer.stateOf('done')?.steps === 2 && consumer.stateOf('live')?.steps === 1 ? true : undefined));

    now += 45_000;
    await bus.publish(step('live', 2));
    await eventually('the live job applied its step', () => (consumer.stateOf('live')?.steps === 2 ? true : undefined));
    now += 30_000; // 'done' silent 75 s, 'live' 30 s
    expect(await consumer.evictIdleJobs()).toEqual(['done']);
    expect(consumer.jobs()).toEqual(['live']);
    expect(consumer.stateOf('done')).toBeUndefined();

    await bus.publish(step('done', 3));
    // Not 1 (a fresh state): the two steps before the eviction came back from the inbox.
    await eventually('the evicted job restored and advanced', () => (consumer.stateOf('done')?.steps === 3 ? true : undefined));
  });

  it('on a restart, a job whose newest message is older than the retention stays out of memory; a recent one is folded in', async () => {
    await bus.publish([step('old', 1), step('old', 2)]);
    await eventually('the old job applied', () => (consumer.stateOf('old')?.steps === 2 ? true : undefined));
    now += 50_000;
    await bus.publish(step('recent', 1));
    await eventually('the recent job applied', () => (consumer.stateOf('recent')?.steps === 1 ? true : undefined));
    await consumer.stop();

    now += 20_000; // 'old' last spoke 70 s ago, 'recent' 20 s ago; the retention is 60 s
    consumer = counterConsumer();
    await consumer.start();
    expect(consumer.jobs()).toEqual(['recent']);
    await bus.publish(step('old', 3));
    await eventually('the old job restored when it speaks', () => (consumer.stateOf('old')?.steps === 3 ? true : undefined));
  });

  it('reads its retention from ROBUSTRL_JOB_STATE_RETENTION_SECONDS, `off` for never, and refuses a bad value', () => {
    expect(idleJobRetentionFromEnv({})).toBe(3_600_000);
    expect(idleJobRetentionFromEnv({ ROBUSTRL_JOB_STATE_RETENTION_SECONDS: '90' })).toBe(90_000);
    expect(idleJobRetentionFromEnv({ ROBUSTRL_JOB_STATE_RETENTION_SECONDS: 'off' })).toBeNull();
    expect(() => idleJobRetentionFromEnv({ ROBUSTRL_JOB_STATE_RETENTION_SECONDS: '-1' })).toThrow(/ROBUSTRL_JOB_STATE_RETENTION_SECONDS/);
  });
});
