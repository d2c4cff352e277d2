import { randomUUID } from 'node:crypto';
import { createMessage } from '@robustrl/contracts';
import { freshPostgresStore } from '@robustrl/testing/databases';
import { EventStore, STORE_MIGRATIONS } from '@robustrl/store';
import { describeEventStore } from '../../../test/contract/event-store-contract';

describeEventStore('the PostgreSQL server', async () => {
  const { store, drop } = await freshPostgresStore();
  return { store, close: drop };
});

describe('event log on the PostgreSQL server, with concurrent writers', () => {
  let store: EventStore;
  let drop: () => Promise<void>;
  beforeAll(async () => ({ store, drop } = await freshPostgresStore()));
  afterAll(async () => drop?.());

  it('never lets a forward reader skip an event whose transaction commits late', async () => {
    const jobId = `job-${randomUUID()}`;
    const msg = (i: number) =>
      createMessage(
        'TrainingStepStarted',
        { step: i, batchId: `b${i}`, startedAt: '2026-11-21T10:00:00.000Z' },
        { jobId, source: 'spec', occurredAt: '2026-11-21T10:00:00.000Z' },
      );
    const before = (await store.readAll('0', 100_000)).at(-1)?.position ?? '0';

    let releaseSlow!: () => void;
    const slowMayCommit = new Promise<void>((r) => (releaseSlow = r));
    let slowInserted!: () => void;
    const slowHasPosition = new Promise<void>((r) => (slowInserted = r));
    // Takes a lower position first, commits last.
    const slow = store.transaction(async (m) => {
      await store.log.append(m, [msg(1)]);
      slowInserted();
      await slowMayCommit;
    });
    await slowHasPosition;
    await store.append([msg(2)]); // higher position, committed first

    const whileOpen = await store.readAll(before);
    expect(whileOpen.filter((r) => r.message.jobId === jobId)).toEqual([]);

    releaseSlow();
    await slow;
    const afterCommit = (await store.readAll(before)).filter((r) => r.message.jobId === jobId);
    expect(afterCommit.map((r) => (r.message.data as { step: number }).step)).toEqual([1, 2]);
  });

  it('lets several services migrate one database at once', async () => {
    const url = (store.dataSource.options as { url: string }).url;
    const stores = await Promise.all([1, 2, 3].map(() => EventStore.open({ kind: 'postgres', url })));
    const rows: Array<{ name: string }> = await store.dataSource.query(`SELECT name FROM robustrl_migrations`);
    expect(rows.map((r) => r.name)).toEqual(STORE_MIGRATIONS.map((m) => m.name));
    await Promise.all(stores.map((s) => s.close()));
  });
});
