import { randomUUID } from 'node:crypto';
import { createMessage, RobustrlMessage } from '@robustrl/contracts';
import { MigrationInterface, QueryRunner } from 'typeorm';
import { EventStore, STORE_MIGRATIONS } from '@robustrl/store';

/** A service's own table, as a service hands it to the store. */
class SpecServiceTable1999000000000 implements MigrationInterface {
  name = 'SpecServiceTable1999000000000';
  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE spec_service_table (id TEXT PRIMARY KEY)`);
  }
  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE spec_service_table`);
  }
}

/** The store's behaviour, run against the PostgreSQL server and against PGlite: same SQL, same results. */
export function describeEventStore(backend: string, open: () => Promise<{ store: EventStore; close(): Promise<void> }>): void {
  describe(`event store on ${backend}`, () => {
    let store: EventStore;
    let close: () => Promise<void>;
    beforeAll(async () => ({ store, close } = await open()));
    afterAll(async () => close?.());

    const ack = (jobId: string, i: number): RobustrlMessage =>
      createMessage(
        'HeartbeatAcked',
        { probeId: `p${i}`, machineId: 'm1', ackedAt: '2026-11-21T10:00:00.000Z' },
        { jobId, source: 'spec', occurredAt: `2026-11-21T10:00:0${i}.000Z` },
      );

    it('appends with increasing global positions and stores a redelivered event once', async () => {
      const jobId = `job-${randomUUID()}`;
      const [a, b] = [ack(jobId, 1), ack(jobId, 2)];
      const first = await store.append([a, b]);
      const again = await store.append([a]);
      expect(BigInt(first[1]!)).toBeGreaterThan(BigInt(first[0]!));
      expect(again).toEqual([null]);
      const read = await store.readJob(jobId);
      expect(read.map((r) => r.message)).toEqual([a, b]);
      expect(read.map((r) => r.position)).toEqual(first);
    });

    it('refuses to update or delete the log', async () => {
      await expect(store.transaction((m) => m.query(`DELETE FROM robustrl_event_log`))).rejects.toThrow(/append-only/);
      await expect(store.transaction((m) => m.query(`UPDATE robustrl_event_log SET source = 'x'`))).rejects.toThrow(/append-only/);
    });

    it('applies an effect once per position, even when deliveries race', async () => {
      const consumer = `c-${randomUUID()}`;
      await store.transaction((m) => m.query(`CREATE TABLE IF NOT EXISTS spec_effects (consumer TEXT, n INTEGER)`));
      const at = { topic: 'robustrl.training', partition: 1, offset: '41' };
      const effect = (m: Parameters<Parameters<EventStore['applyOnce']>[2]>[0]) => m.query(`INSERT INTO spec_effects VALUES ($1, 1)`, [consumer]);
      const outcomes = await Promise.all([1, 2, 3, 4].map(() => store.applyOnce(consumer, at, effect)));
      expect(outcomes.filter((o) => o === 'applied')).toHaveLength(1);
      expect(await store.applyOnce(consumer, { ...at, offset: '40' }, effect)).toBe('duplicate');
      expect(await store.applyOnce(consumer, { ...at, offset: '42' }, effect)).toBe('applied');
      const rows: Array<{ count: string }> = await store.dataSource.query(`SELECT count(*)::text AS count FROM spec_effects WHERE consumer = $1`, [consumer]);
      expect(rows[0].count).toBe('2');
      expect(await store.checkpoints.read(store.dataSource.manager, consumer, 'robustrl.training/1')).toBe('42');
    });

    it("runs a service's own migrations once, next to its own, and finds a latest message by type", async () => {
      await Promise.all([store.migrate([SpecServiceTable1999000000000]), store.append([ack(`job-${randomUUID()}`, 1)])]);
      await store.migrate([SpecServiceTable1999000000000]); // already run: nothing to do
      const rows: Array<{ name: string }> = await store.dataSource.query(`SELECT name FROM robustrl_migrations ORDER BY id`);
      expect(rows.map((r) => r.name)).toEqual([...STORE_MIGRATIONS.map((m) => m.name), 'SpecServiceTable1999000000000']);
      await store.transaction((m) => m.query(`INSERT INTO spec_service_table VALUES ('x')`));

      const jobId = `job-${randomUUID()}`;
      const [a, b] = [ack(jobId, 1), ack(jobId, 2)];
      expect(await store.latestOfType(jobId, 'HeartbeatAcked')).toBeNull();
      await store.append([a, b]);
      expect(await store.latestOfType(jobId, 'HeartbeatAcked')).toEqual(b);
      expect(await store.latestOfType(jobId, 'JobStarted')).toBeNull();
      expect(await store.inbox.has(store.dataSource.manager, `c-${randomUUID()}`, a.eventId)).toBe(false);
    });

    it('rolls the checkpoint back with a failed effect, so the redelivery applies it', async () => {
      const consumer = `c-${randomUUID()}`;
      const at = { topic: 'robustrl.training', partition: 0, offset: '7' };
      await expect(store.applyOnce(consumer, at, async () => Promise.reject(new Error('effect failed')))).rejects.toThrow('effect failed');
      expect(await store.applyOnce(consumer, at, async () => undefined)).toBe('applied');
    });
  });
}
