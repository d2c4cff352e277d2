import { Logger } from '@nestjs/common';
import { InProcessBus } from '@robustrl/bus';
import { createMessage, RobustrlMessage, Topics } from '@robustrl/contracts';
import { EventStore } from '@robustrl/store';
import { eventually } from '@robustrl/testing/eventually';
import { emptyWrite, PendingWrite, ReloadingError } from './deciding-types';
import { DecisionWriter, MAX_WRITES_IN_FLIGHT } from './decision-writer';

const STREAM = `${Topics.training}/0`;
const logger = Object.assign(new Logger('decision-writer.spec'), { log: jest.fn(), warn: jest.fn(), error: jest.fn() });

describe('DecisionWriter: the writes of a deciding consumer, and their outbox', () => {
  let store: EventStore;
  let bus: InProcessBus;
  let published: RobustrlMessage[];
  let n = 0;
  const NAME = () => `writer-${n}`;
  const fact = (jobId: string) =>
    createMessage('TrainingStepCompleted', { step: 1, batchId: 'b', durationMs: 1 }, { jobId, source: 'spec', occurredAt: new Date().toISOString() });
  const output = (cause: RobustrlMessage) =>
    createMessage(
      'DetectionPaused',
      { reason: 'consumer-lag', blindSince: cause.occurredAt, detail: 'spec' },
      { jobId: cause.jobId, source: NAME(), occurredAt: cause.occurredAt, causationId: cause.eventId },
    );
  /** A batch's write: the fact, what it led to, the checkpoint at `offset`. */
  const batchWrite = (offset: number, jobId = 'job-1'): PendingWrite => {
    const input = fact(jobId);
    const out = output(input);
    return {
      ...emptyWrite(),
      checkpoint: { stream: STREAM, offset: String(offset) },
      applied: [input, out],
      outbox: [out],
      emitted: new Map([[jobId, [out]]]),
      inputs: [{ input, emitted: [out] }],
    };
  };
  /** Reloads as the host's: a failure makes the state stale. */
  const reloads = () => {
    const r = { stale: false, begin: jest.fn(() => void (r.stale = true)), committed: jest.fn() };
    return r;
  };

  beforeAll(async () => {
    store = await EventStore.open({ kind: 'pglite' });
    bus = new InProcessBus();
    published = [];
    await bus.subscribe({ groupId: 'spec-observer', topics: [Topics.verdicts], handler: async (d) => void published.push(d.message) });
  });
  afterAll(async () => {
    await bus.close();
    await store.close();
  });
  beforeEach(() => {
    n += 1;
    published.length = 0;
  });

  it('writes checkpoint, inbox, log and outbox at once, then tells the listeners and relays the outputs', async () => {
    const onEmitted = jest.fn();
    const onApplied = jest.fn();
    const r = reloads();
    const writer = new DecisionWriter(bus, store, NAME(), r, { onEmitted, onApplied }, logger);
    const write = batchWrite(7);
    writer.appliedFacts.add(write.applied[0].eventId);
    await writer.commit(write);

    expect(r.committed).toHaveBeenCalledTimes(1);
    expect(writer.appliedFacts.size).toBe(0); // the inbox answers for it now
    const manager = store.dataSource.manager;
    expect(await store.checkpoints.readAll(manager, NAME())).toEqual(new Map([[STREAM, '7']]));
    expect((await store.inbox.read(manager, NAME())).map((row) => row.message.eventId)).toEqual(write.applied.map((m) => m.eventId));
    expect((await store.readJob('job-1')).map((l) => l.message.eventId)).toEqual(expect.arrayContaining(write.applied.map((m) => m.eventId)));
    expect(onEmitted).toHaveBeenCalledWith(write.outbox, 'job-1');
    expect(onApplied).toHaveBeenCalledWith(write.applied[0], write.outbox);
    await eventually('the output relayed', () => (published.some((m) => m.eventId === write.outbox[0].eventId) ? true : undefined));
    expect(await writer.relay()).toBe(true);
  });

  it('a checkpoint already past refuses the write and starts a reload; while stale every write is refused unwritten', async () => {
    const r = reloads();
    const writer = new DecisionWriter(bus, store, NAME(), r, {}, logger);
    await writer.commit(batchWrite(10));
    const behind = batchWrite(5);
    writer.appliedFacts.add(behind.applied[0].eventId);
    await expect(writer.commit(behind)).rejects.toThrow(/write failed, state reloads: .*checkpoint of .* is already past 5: another process consumes it/);
    expect(r.begin).toHaveBeenCalledTimes(1);
    expect(writer.appliedFacts.has(behind.applied[0].eventId)).toBe(true); // until the reload clears it

    await expect(writer.commit(batchWrite(11))).rejects.toThrow(ReloadingError);
    await expect(writer.chain(async () => undefined)).rejects.toThrow(ReloadingError);
    expect(await store.checkpoints.readAll(store.dataSource.manager, NAME())).toEqual(new Map([[STREAM, '10']]));
    expect(await store.inbox.read(store.dataSource.manager, NAME())).toHaveLength(2);
  });

  it(`lets ${MAX_WRITES_IN_FLIGHT} writes be in flight while the next batch is decided, makes the next wait, and keeps their order`, async () => {
    const writer = new DecisionWriter(bus, store, NAME(), reloads(), {}, logger);
    let open!: () => void;
    const held = new Promise<void>((resolve) => (open = resolve));
    const query = store.dataSource.manager.query.bind(store.dataSource.manager);
    const slow = jest.spyOn(store.dataSource.manager, 'query').mockImplementation(async (sql: string, params?: unknown[]) => {
      await held;
      return query(sql, params);
    });
    try {
      const writes = Array.from({ length: MAX_WRITES_IN_FLIGHT + 1 }, (_, i) => batchWrite(i + 1, `job-${i}`));
      const settledNow = async (p: Promise<unknown>) => {
        let done = false;
        void p.then(() => (done = true));
        await new Promise((r) => setImmediate(r));
        return done;
      };
      for (const w of writes.slice(0, MAX_WRITES_IN_FLIGHT)) expect(await settledNow(writer.commitInFlight(w))).toBe(true);
      const waiting = writer.commitInFlight(writes[MAX_WRITES_IN_FLIGHT]);
      expect(await settledNow(waiting)).toBe(false);
      const after = jest.fn();
      const chained = writer.chain(async () => after());
      open();
      await waiting;
      await chained;
      await writer.settled();
      expect(after).toHaveBeenCalledTimes(1);
      slow.mockRestore();
      const facts = (await store.inbox.read(store.dataSource.manager, NAME())).filter((row) => row.message.type === 'TrainingStepCompleted');
      expect(facts.map((row) => row.message.jobId)).toEqual(writes.map((w) => w.applied[0].jobId));
      expect(await store.checkpoints.readAll(store.dataSource.manager, NAME())).toEqual(new Map([[STREAM, String(MAX_WRITES_IN_FLIGHT + 1)]]));
    } finally {
      slow.mockRestore();
    }
  });
});
