import { Logger } from '@nestjs/common';
import { Delivery, DeliveryBatch } from '@robustrl/bus';
import { createMessage, draft, Draft, MessageOf, RobustrlMessage, Topics } from '@robustrl/contracts';
import { Decider, JobCommand } from '@robustrl/domain-kit';
import { BatchDecider } from './batch-decider';
import { PendingWrite, ReloadingError } from './deciding-types';
import { DecisionSteps } from './decision-steps';
import { JobStates } from './job-states';
import { PoisonMessages } from './poison-messages';

type Step = MessageOf<'TrainingStepCompleted'>;
type Sample = MessageOf<'GpuActivitySampled'>;
type Paused = MessageOf<'DetectionPaused'>;
type Event = Step | Sample | Paused;
type Tally = { facts: number; samples: number };
/** Counts facts and samples; announces each step (step 666 makes it throw). */
const tally: Decider<Tally, JobCommand<Step | Sample>, Event, Draft> = {
  initialState: () => ({ facts: 0, samples: 0 }),
  evolve: (s, e) =>
    e.type === 'GpuActivitySampled' ? { ...s, samples: s.samples + 1 } : e.type === 'TrainingStepCompleted' ? { ...s, facts: s.facts + 1 } : s,
  decide: (c) => {
    if (c.kind !== 'observe' || c.message.type !== 'TrainingStepCompleted') return [];
    if (c.message.data.step === 666) throw new Error('the number of the beast');
    return [draft('DetectionPaused', { reason: 'consumer-lag', blindSince: c.message.occurredAt, detail: `step ${c.message.data.step}` })];
  },
};
const NOW = Date.parse('2026-11-23T00:00:00Z');
const STREAM = `${Topics.training}/0`;
const meta = (jobId: string) => ({ jobId, source: 'spec', occurredAt: new Date(NOW - 1_000).toISOString() });
const fact = (jobId: string, n: number) => createMessage('TrainingStepCompleted', { step: n, batchId: `b${n}`, durationMs: 1 }, meta(jobId));
const sample = (jobId: string) =>
  createMessage(
    'GpuActivitySampled',
    { machineId: 'trainer-0', sampledAt: new Date(NOW).toISOString(), intervalSeconds: 1, tensorActive: 0.5, source: 'emulated' },
    meta(jobId),
  );
/** A batch of partition 0 from `first` on, one offset per message. */
const batchOf = (first: number, messages: RobustrlMessage[]): DeliveryBatch => ({
  topic: Topics.training,
  partition: 0,
  deliveries: messages.map((message, i): Delivery => ({
    message,
    topic: Topics.training,
    partition: 0,
    offset: String(first + i),
    key: message.jobId,
    headers: {},
    groupId: 'g',
    attempt: 1,
  })),
  nextOffset: String(first + messages.length),
  groupId: 'g',
  attempt: 1,
});

function decider(options: { known?: string[]; watched?: boolean; stale?: boolean } = {}) {
  const logger = Object.assign(new Logger('batch-decider.spec'), { log: jest.fn(), error: jest.fn() });
  const states = new JobStates<Tally, Event>(tally, null, () => NOW, logger);
  const writes: PendingWrite[] = [];
  const calls: string[] = [];
  const parts = {
    states,
    loader: { ensureLoaded: jest.fn(async (jobId: string) => void calls.push(`load ${jobId}`)), decidedBefore: new Map<string, bigint>() },
    writer: { appliedFacts: new Set<string>(), commitInFlight: jest.fn(async (w: PendingWrite) => void writes.push(w)) },
    gaps: {
      watched: options.watched ?? false,
      noteInput: jest.fn(),
      dueFor: (jobId: string) => jobId === 'blind',
      recordGapFor: jest.fn(async (jobId: string) => void calls.push(`gap ${jobId}`)),
    },
    steps: new DecisionSteps<Tally, Event, Step | Sample>({ consumer: 'tally', decider: tally }, 'robustrl-tally'),
    poison: new PoisonMessages({
      bus: { publishRaw: jest.fn(async () => undefined), maxRecordBytes: 1_000_000 },
      groupId: 'robustrl-tally',
      reloads: { begin: jest.fn() },
      inPlace: false,
      isStopped: () => false,
      clock: () => NOW,
      logger,
    }),
    reloads: { stale: options.stale ?? false },
    known: jest.fn(async (ids: string[]) => new Set(ids.filter((id) => options.known?.includes(id)))),
    inTurn: <T>(work: () => Promise<T>): Promise<T> => {
      calls.push('in turn');
      return work();
    },
    isStopped: () => false,
    clock: () => NOW,
  };
  return { batches: new BatchDecider<Tally, Event, Step | Sample>(parts), parts, states, writes, calls };
}

describe('BatchDecider: a batch decided in one go', () => {
  it('decides each record and hands over one write: facts and outputs in order, the checkpoint at its last offset', async () => {
    const { batches, states, writes, parts } = decider();
    const [f1, f2, s1] = [fact('a', 1), fact('a', 2), sample('b')];
    await batches.decide(batchOf(10, [f1, f2, s1]));
    expect(writes).toHaveLength(1);
    const [write] = writes;
    expect(write.checkpoint).toEqual({ stream: STREAM, offset: '12' });
    expect(write.applied.map((m) => m.type)).toEqual(['TrainingStepCompleted', 'DetectionPaused', 'TrainingStepCompleted', 'DetectionPaused']);
    expect(write.applied[0]).toBe(f1);
    expect(write.outbox.map((m) => (m.data as { detail: string }).detail)).toEqual(['step 1', 'step 2']);
    expect([...write.emitted.keys()]).toEqual(['a']);
    // A sample is decided on and folded, and written nowhere.
    expect(write.inputs.map((i) => i.input)).toEqual([f1, f2, s1]);
    expect(states.get('a')).toEqual({ facts: 2, samples: 0 });
    expect(states.get('b')).toEqual({ facts: 0, samples: 1 });
    expect(states.applied.get(STREAM)).toBe(13n);
    expect([...states.dirty]).toEqual(['a', 'b']);
    expect(states.lastActive.get('a')).toBe(NOW);
    expect([...parts.writer.appliedFacts]).toEqual([f1.eventId, f2.eventId]);
    expect(parts.known).toHaveBeenCalledWith([f1.eventId, f2.eventId]);
  });

  it('skips a fact the inbox holds or a write in flight applied, and the records before the position the states cover', async () => {
    const [old, inInbox, inFlight, fresh] = [fact('a', 1), fact('a', 2), fact('a', 3), fact('a', 4)];
    const { batches, states, writes, parts } = decider({ known: [inInbox.eventId] });
    parts.writer.appliedFacts.add(inFlight.eventId);
    states.applied.set(STREAM, 11n);
    await batches.decide(batchOf(10, [old, inInbox, inFlight, fresh]));
    expect(writes[0].applied).toEqual([fresh, expect.objectContaining({ causationId: fresh.eventId })]);
    expect(states.get('a')).toEqual({ facts: 1, samples: 0 });

    // A batch wholly before the position is no batch at all.
    await batches.decide(batchOf(0, [fact('a', 9)]));
    expect(writes).toHaveLength(1);
  });

  it('after a restart, records up to the checkpoint are not decided again: their samples are folded, nothing is written', async () => {
    const { batches, states, writes, parts } = decider();
    parts.loader.decidedBefore.set(STREAM, 11n);
    await batches.decide(batchOf(10, [fact('a', 1), sample('a')]));
    expect(writes).toEqual([]);
    expect(states.get('a')).toEqual({ facts: 0, samples: 1 });
    expect(states.applied.get(STREAM)).toBe(12n);

    // A batch that straddles the checkpoint: what is after it is decided and written.
    const straddling = decider();
    straddling.parts.loader.decidedBefore.set(STREAM, 11n);
    await straddling.batches.decide(batchOf(10, [fact('a', 1), sample('a'), sample('a'), fact('a', 2)]));
    expect(straddling.writes).toHaveLength(1);
    expect(straddling.writes[0].checkpoint).toEqual({ stream: STREAM, offset: '13' });
    expect(straddling.writes[0].applied.map((m) => m.type)).toEqual(['TrainingStepCompleted', 'DetectionPaused']);
    expect(straddling.states.get('a')).toEqual({ facts: 1, samples: 2 });
  });

  it('brings its jobs back into memory first, and records what is due of an input gap in turn before deciding', async () => {
    const { batches, parts, calls, writes } = decider({ watched: true });
    const messages = [fact('blind', 1), fact('seeing', 1)];
    await batches.decide(batchOf(0, messages));
    expect(calls).toEqual(['load blind', 'load seeing', 'in turn', 'gap blind']);
    expect(parts.gaps.noteInput.mock.calls.map(([m]) => m)).toEqual(messages);
    expect(writes).toHaveLength(1);
  });

  it('decides nothing while the state reloads', async () => {
    const { batches, parts, writes } = decider({ stale: true });
    await batches.decide(batchOf(0, [fact('a', 1)]));
    expect(parts.loader.ensureLoaded).not.toHaveBeenCalled();
    expect(writes).toEqual([]);
  });

  it('a record the decider keeps throwing on fails the batch (to come again), then is dead-lettered and left out of the write', async () => {
    const { batches, writes, states, parts } = decider();
    /** What a reload does: the states and the facts of writes in flight start over. */
    const reload = () => {
      states.reset();
      parts.writer.appliedFacts.clear();
    };
    const poisoned = batchOf(0, [fact('a', 1), fact('a', 666), fact('a', 2)]);
    await expect(batches.decide(poisoned)).rejects.toThrow(ReloadingError);
    reload();
    await expect(batches.decide(poisoned)).rejects.toThrow(ReloadingError);
    reload();
    await batches.decide(poisoned);
    expect(writes).toHaveLength(1);
    expect(writes[0].inputs.map((i) => (i.input.data as { step: number }).step)).toEqual([1, 2]);
    expect(states.get('a')).toEqual({ facts: 2, samples: 0 });
  });
});
