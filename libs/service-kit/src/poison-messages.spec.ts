import { Logger } from '@nestjs/common';
import { Delivery, DeadLetterHeaders, RawRecord } from '@robustrl/bus';
import { createMessage, DEAD_LETTER_TOPIC, Topics } from '@robustrl/contracts';
import { eventually } from '@robustrl/testing/eventually';
import { ReloadingError } from './deciding-types';
import { POISON_ATTEMPTS, PoisonMessages } from './poison-messages';

const NOW = Date.parse('2026-11-23T00:00:00Z');
const message = createMessage(
  'TrainingStepCompleted',
  { step: 1, batchId: 'b1', durationMs: 1 },
  { jobId: 'job-1', source: 'spec', occurredAt: new Date(NOW).toISOString() },
);
const delivery: Delivery = { message, topic: Topics.training, partition: 2, offset: '41', key: 'job-1', headers: {}, groupId: 'robustrl-spec', attempt: 1 };
const logger = new Logger('poison-messages.spec');
jest.spyOn(logger, 'error').mockImplementation(() => undefined);
const boom = () => {
  throw new Error('boom');
};

function poisonWith(inPlace: boolean, publishRaw = jest.fn(async (_: RawRecord) => undefined)) {
  const begin = jest.fn();
  let stopped = false;
  const poison = new PoisonMessages({
    bus: { publishRaw, maxRecordBytes: 1_000_000 },
    groupId: 'robustrl-spec',
    reloads: { begin },
    inPlace,
    isStopped: () => stopped,
    clock: () => NOW,
    logger,
  });
  return { poison, begin, publishRaw, stop: () => (stopped = true) };
}
/** Decide on the delivery until it is dead-lettered (a decider that is not in place). */
function exhaust(poison: PoisonMessages): void {
  for (let attempt = 1; attempt < POISON_ATTEMPTS; attempt++) expect(() => poison.guard(delivery, boom)).toThrow(ReloadingError);
  expect(poison.guard(delivery, boom)).toBeNull();
}

describe('PoisonMessages: a message the decider throws on', () => {
  it('passes a decision that does not throw through', () => {
    const { poison, begin, publishRaw } = poisonWith(false);
    expect(poison.guard(delivery, () => 'decided')).toBe('decided');
    expect(begin).not.toHaveBeenCalled();
    expect(publishRaw).not.toHaveBeenCalled();
  });

  it(`reloads and lets the message come again; on attempt ${POISON_ATTEMPTS} dead-letters it with the error and skips it`, async () => {
    const { poison, begin, publishRaw } = poisonWith(false);
    for (let attempt = 1; attempt < POISON_ATTEMPTS; attempt++) {
      expect(() => poison.guard(delivery, boom)).toThrow(ReloadingError);
      expect(begin).toHaveBeenCalledTimes(attempt);
    }
    expect(String(begin.mock.calls[0][0])).toMatch(/deciding on TrainingStepCompleted .* threw: Error: boom/);
    expect(publishRaw).not.toHaveBeenCalled();

    expect(poison.guard(delivery, boom)).toBeNull();
    expect(begin).toHaveBeenCalledTimes(POISON_ATTEMPTS - 1);
    await eventually('the dead letter written', () => (publishRaw.mock.calls.length > 0 ? true : undefined));
    const record = publishRaw.mock.calls[0][0];
    expect(record.topic).toBe(DEAD_LETTER_TOPIC);
    expect(record.headers).toEqual(
      expect.objectContaining({
        [DeadLetterHeaders.kind]: 'handler-failed',
        [DeadLetterHeaders.originalTopic]: Topics.training,
        [DeadLetterHeaders.originalOffset]: '41',
        [DeadLetterHeaders.consumerGroup]: 'robustrl-spec',
        [DeadLetterHeaders.deadLetteredAt]: new Date(NOW).toISOString(),
      }),
    );
    expect(record.headers?.[DeadLetterHeaders.reason]).toBe(`deciding on it threw ${POISON_ATTEMPTS} times: Error: boom`);
  });

  it('a decider evolving in place reloads on the last attempt too: the job may be half-changed', async () => {
    const { poison, begin, publishRaw } = poisonWith(true);
    for (let attempt = 1; attempt <= POISON_ATTEMPTS; attempt++) expect(() => poison.guard(delivery, boom)).toThrow(ReloadingError);
    expect(begin).toHaveBeenCalledTimes(POISON_ATTEMPTS);
    await eventually('the dead letter written', () => (publishRaw.mock.calls.length > 0 ? true : undefined));
  });

  it('retries writing the dead letter until the bus takes it, and gives up once stopped', async () => {
    const refusing = jest.fn(async (_: RawRecord) => undefined).mockRejectedValueOnce(new Error('broker down'));
    const { poison, publishRaw } = poisonWith(false, refusing);
    exhaust(poison);
    await eventually('written on the second attempt', () => (publishRaw.mock.calls.length === 2 ? true : undefined));

    const down = jest.fn(async (_: RawRecord) => {
      throw new Error('broker down');
    });
    const stopping = poisonWith(false, down);
    exhaust(stopping.poison);
    expect(down).toHaveBeenCalledTimes(1);
    stopping.stop();
    await new Promise((r) => setTimeout(r, 700));
    expect(down).toHaveBeenCalledTimes(1);
  });
});
