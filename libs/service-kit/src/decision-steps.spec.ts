import { Delivery } from '@robustrl/bus';
import { createMessage, draft, Draft, MessageOf, Topics } from '@robustrl/contracts';
import { Decider, JobCommand } from '@robustrl/domain-kit';
import { DecisionSteps, StepSpec } from './decision-steps';

type Step = MessageOf<'TrainingStepCompleted'>;
type Paused = MessageOf<'DetectionPaused'>;
type State = { steps: number };
/** One output per step observed, two on a tick once a step was seen: each decision is a message to look at. */
const announcer: Decider<State, JobCommand<Step | Paused>, Step | Paused, Draft> = {
  initialState: () => ({ steps: 0 }),
  evolve: (s, e) => (e.type === 'TrainingStepCompleted' ? { steps: s.steps + 1 } : s),
  decide: (c, s) => {
    if (c.kind === 'observe' && c.message.type === 'TrainingStepCompleted')
      return [draft('DetectionPaused', { reason: 'consumer-lag', blindSince: c.message.occurredAt, detail: `step ${c.message.data.step}` })];
    if (c.kind === 'tick' && s.steps > 0)
      return ['first', 'second'].map((detail) => draft('DetectionPaused', { reason: 'consumer-restart', blindSince: new Date(c.now).toISOString(), detail }));
    return [];
  },
};
const NOW = Date.parse('2026-11-23T00:00:00Z');
const delivery = (message: Step): Delivery => ({
  message,
  topic: Topics.training,
  partition: 0,
  offset: '7',
  key: message.jobId,
  headers: {},
  groupId: 'robustrl-announcer',
  attempt: 1,
});
const step = (jobId: string, n: number) =>
  createMessage('TrainingStepCompleted', { step: n, batchId: `b${n}`, durationMs: 1 }, { jobId, source: 'spec', occurredAt: new Date(NOW).toISOString() });
const steps = (consumer: string, extra: Partial<StepSpec<State, Step | Paused, Step | Paused>> = {}) =>
  new DecisionSteps<State, Step | Paused>({ consumer, decider: announcer, ...extra }, `robustrl-${consumer}`);

describe('DecisionSteps: decisions made messages', () => {
  it('envelopes what a delivery decides with ids derived from the input: deciding it again yields the same messages', () => {
    const input = step('job-1', 3);
    const first = steps('announcer').onDelivery(delivery(input), { steps: 0 }, NOW);
    const again = steps('announcer').onDelivery(delivery(input), { steps: 0 }, NOW);
    expect(first.state).toEqual({ steps: 1 });
    expect(first.events).toHaveLength(1);
    expect(first.events[0]).toEqual(
      expect.objectContaining({
        type: 'DetectionPaused',
        jobId: 'job-1',
        source: 'announcer',
        causationId: input.eventId,
        correlationId: input.correlationId,
        occurredAt: new Date(NOW).toISOString(),
        data: expect.objectContaining({ detail: 'step 3' }),
      }),
    );
    expect(again.events.map((e) => e.eventId)).toEqual(first.events.map((e) => e.eventId));
    // Another consumer deciding on the same input emits other messages.
    expect(steps('other').onDelivery(delivery(input), { steps: 0 }, NOW).events[0].eventId).not.toBe(first.events[0].eventId);
  });

  it('completes each draft before enveloping it, and leaves a decider throw to the caller', () => {
    const completing = steps('announcer', { completeDraft: (d) => ({ ...d, data: { ...(d.data as object), detail: 'completed' } }) as Draft });
    expect(completing.onDelivery(delivery(step('job-1', 1)), { steps: 0 }, NOW).events[0].data).toEqual(expect.objectContaining({ detail: 'completed' }));

    const throwing = new DecisionSteps<State, Step>(
      {
        consumer: 'thrower',
        decider: {
          ...announcer,
          decide: () => {
            throw new Error('boom');
          },
        } as unknown as Decider<State, JobCommand<Step>, Step, Draft>,
      },
      'robustrl-thrower',
    );
    expect(() => throwing.onDelivery(delivery(step('job-1', 1)), { steps: 0 }, NOW)).toThrow('boom');
  });

  it("a tick's outputs are one story: the first one's id is their correlation; a tick that decides nothing is null", () => {
    const spanForTick = jest.fn(() => null);
    const ticking = steps('announcer', { spanForTick });
    expect(ticking.onTick('job-1', { steps: 0 }, NOW)).toBeNull();
    expect(spanForTick).not.toHaveBeenCalled();

    const ticked = ticking.onTick('job-1', { steps: 2 }, NOW)!;
    expect(ticked.events.map((e) => e.data)).toEqual([expect.objectContaining({ detail: 'first' }), expect.objectContaining({ detail: 'second' })]);
    expect(ticked.events.map((e) => [e.jobId, e.causationId, e.correlationId])).toEqual([
      ['job-1', null, ticked.events[0].eventId],
      ['job-1', null, ticked.events[0].eventId],
    ]);
    expect(spanForTick).toHaveBeenCalledWith(ticked.outputs, NOW);
    expect(ticked.state).toEqual({ steps: 2 });
  });

  it('a host input takes its id from the job and its cause, and is decided on like a delivery', () => {
    const s = steps('announcer');
    const id = s.hostInputId('job-1', 'paused/100');
    expect(s.hostInputId('job-1', 'paused/100')).toBe(id);
    expect(s.hostInputId('job-1', 'resumed/100')).not.toBe(id);
    expect(s.hostInputId('job-2', 'paused/100')).not.toBe(id);

    const paused = draft('DetectionPaused', { reason: 'broker-unreachable', blindSince: new Date(NOW).toISOString(), detail: 'down' });
    const { input, stepped } = s.onHostInput('job-1', paused, id, { steps: 0 }, NOW);
    expect(input).toEqual(
      expect.objectContaining({ type: 'DetectionPaused', eventId: id, jobId: 'job-1', source: 'announcer', causationId: null, correlationId: id }),
    );
    // The announcer decides nothing on its own pause: the input alone, folded.
    expect(stepped.events).toEqual([]);
    expect(stepped.state).toEqual({ steps: 0 });
    expect(s.onHostInput('job-1', paused, id, { steps: 0 }, NOW).input).toEqual(input);
  });
});
