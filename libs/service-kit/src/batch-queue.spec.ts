import { DeliveryBatch } from '@robustrl/bus';
import { BatchQueue, MAX_BATCHES_QUEUED } from './batch-queue';
import { ReloadingError } from './deciding-types';

const batch = (partition: number, nextOffset: number): DeliveryBatch => ({
  topic: 'robustrl.training',
  partition,
  deliveries: [],
  nextOffset: String(nextOffset),
  groupId: 'robustrl-spec',
  attempt: 1,
});
const name = (b: DeliveryBatch) => `${b.partition}@${b.nextOffset}`;
/** A promise with its resolve, to hold a batch's decision until the test lets it go. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
const reloads = () => ({ stale: false, begin: jest.fn(), committed: jest.fn() });
/** Whether the promise settled by the time pending callbacks ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
}

describe('BatchQueue: the batches handed over, decided in turn', () => {
  it("decides each partition's batches in order, and the partitions side by side", async () => {
    const log: string[] = [];
    const held = gate();
    const queue = new BatchQueue(async (b) => {
      log.push(`start ${name(b)}`);
      if (name(b) === '0@10') await held.promise;
      log.push(`end ${name(b)}`);
    }, reloads());
    await queue.hand(batch(0, 10));
    await queue.hand(batch(0, 20));
    await queue.hand(batch(1, 10));
    await new Promise((r) => setImmediate(r));
    // Partition 1 went on while partition 0's first batch is held; its second waits for it.
    expect(log).toEqual(['start 0@10', 'start 1@10', 'end 1@10']);
    held.open();
    await queue.drain();
    expect(log).toEqual(['start 0@10', 'start 1@10', 'end 1@10', 'end 0@10', 'start 0@20', 'end 0@20']);
    expect(queue.queued).toBe(0);
  });

  it(`makes the bus wait once more than ${MAX_BATCHES_QUEUED} batches are queued, and drains them all`, async () => {
    const held = gate();
    const decided: string[] = [];
    const queue = new BatchQueue(async (b) => {
      await held.promise;
      decided.push(name(b));
    }, reloads());
    for (let p = 0; p < MAX_BATCHES_QUEUED; p++) expect(await settled(queue.hand(batch(p, 1)))).toBe(true);
    const oneTooMany = queue.hand(batch(MAX_BATCHES_QUEUED, 1));
    expect(await settled(oneTooMany)).toBe(false);
    expect(queue.queued).toBe(MAX_BATCHES_QUEUED + 1);
    const drained = queue.drain();
    expect(await settled(drained)).toBe(false);
    held.open();
    await oneTooMany;
    await drained;
    expect(decided).toHaveLength(MAX_BATCHES_QUEUED + 1);
  });

  it('a batch that fails starts a reload, unless the failure is the reload itself or one is under way', async () => {
    const failures: unknown[] = [new Error('the store did not answer'), new ReloadingError()];
    const r = reloads();
    const queue = new BatchQueue(async () => {
      throw failures.shift();
    }, r);
    await queue.hand(batch(0, 1));
    await queue.hand(batch(0, 2));
    await queue.drain();
    expect(r.begin).toHaveBeenCalledTimes(1);
    expect(String(r.begin.mock.calls[0][0])).toMatch(/the store did not answer/);

    const underWay = { ...reloads(), stale: true };
    const stale = new BatchQueue(async () => {
      throw new Error('closed');
    }, underWay);
    await stale.hand(batch(0, 1));
    await stale.drain();
    expect(underWay.begin).not.toHaveBeenCalled();
  });
});
