import { Client } from 'pg';
import { EventStore } from '@robustrl/store';
import { freshPostgresStore } from '@robustrl/testing/databases';
import { RecordingBus, trajectory } from '@robustrl/testing/trajectory-fixtures';
import { TRAJECTORY_STORE_MIGRATIONS } from './migrations';
import { TrajectoryStore } from './trajectory-store';

/**
 * What opening trajectories costs PostgreSQL must not grow with the batch they belong to: the router
 * opens every trajectory of a batch (512 prompts × 16 samples in a real job), and an open whose cost grew
 * with the batch took 46 ms for 30 trajectories at 4,500 a batch (docs/benchmarks.md "The router on
 * every request"). The statement the store sends is caught on its way to the pool and run again under
 * EXPLAIN (ANALYZE, BUFFERS) in a transaction rolled back, as the router's sessions plan it (a generic
 * plan) and as a one-off query would (a custom plan); the buffers it touches at two batch sizes are compared.
 */
describe('opening trajectories on PostgreSQL: the cost does not grow with the batch', () => {
  let db: { store: EventStore; drop(): Promise<void> };
  let probe: Client;
  let caught: { text: string; values: unknown[] } | null = null;

  beforeAll(async () => {
    db = await freshPostgresStore({ migrations: TRAJECTORY_STORE_MIGRATIONS });
    probe = new Client({ connectionString: (db.store.dataSource.options as { url: string }).url });
    await probe.connect();
    // The store's statements reach node-postgres's pool as { name, text, values } (queryPrepared).
    const pool = (db.store.dataSource.driver as unknown as { master: { query: (...args: unknown[]) => Promise<unknown> } }).master;
    const query = pool.query.bind(pool);
    pool.query = (...args: unknown[]) => {
      const q = args[0] as { name?: string; text?: string; values?: unknown[] };
      if (q && typeof q === 'object' && q.name === 'robustrl_trajectory_open') caught = { text: q.text!, values: q.values! };
      return query(...args);
    };
  });
  afterAll(async () => {
    await probe?.end();
    await db?.drop();
  });

  /** Shared buffers the statement touched (hit or read), run and rolled back; `generic`: planned as a prepared statement is after its first runs. */
  async function buffersOf(statement: { text: string; values: unknown[] }, generic: boolean): Promise<number> {
    await probe.query('BEGIN');
    try {
      let rows: Array<{ 'QUERY PLAN': Array<{ Plan: Record<string, number> }> }>;
      if (generic) {
        await probe.query('SET LOCAL plan_cache_mode = force_generic_plan');
        await probe.query(`PREPARE open_probe(text, text[]) AS ${statement.text}`);
        // EXECUTE takes no bound parameters: its arguments go as literals.
        const [payload, ids] = statement.values as [string, string[]];
        const args = `${probe.escapeLiteral(payload)}, ARRAY[${ids.map((id) => probe.escapeLiteral(id)).join(', ')}]::text[]`;
        rows = (await probe.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE open_probe(${args})`)).rows;
      } else {
        rows = (await probe.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statement.text}`, statement.values)).rows;
      }
      const plan = rows[0]['QUERY PLAN'][0].Plan;
      return plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
    } finally {
      await probe.query('ROLLBACK');
      await probe.query('DEALLOCATE ALL');
    }
  }

  /**
   * The caught statement for trajectories not stored yet, in slots no one holds: what the router's first
   * open of each trajectory is (the statement caught has since been run, and its new ones are stored).
   */
  function fresh(statement: { text: string; values: unknown[] }): { text: string; values: unknown[] } {
    const rows = JSON.parse(String(statement.values[0])) as Array<{ trajectory_id: string; prompt_id: string }>;
    for (const r of rows) {
      r.trajectory_id = `fresh-${r.trajectory_id}`;
      r.prompt_id = `fresh-${r.prompt_id}`;
    }
    return { text: statement.text, values: [JSON.stringify(rows), rows.map((r) => r.trajectory_id)] };
  }

  /** A batch of `size` trajectories stored, then the open of 8 of them and 8 new ones, caught. */
  async function openInBatch(size: number): Promise<{ text: string; values: unknown[] }> {
    const store = new TrajectoryStore(db.store, new RecordingBus());
    const batchId = `batch-${size}`;
    const of = (i: number) => trajectory(`${batchId}-t${i}`, { batchId, promptId: `p${i >> 4}`, sampleIndex: i % 16 });
    for (let from = 0; from < size; from += 500) await store.startTrajectories(Array.from({ length: Math.min(500, size - from) }, (_, k) => of(from + k)));
    caught = null;
    const opened = await store.openTrajectories([...Array.from({ length: 8 }, (_, k) => of(k * 7)), ...Array.from({ length: 8 }, (_, k) => of(size + k))]);
    expect(opened.map((o) => o.outcome)).toEqual([...Array(8).fill('existing'), ...Array(8).fill('created')]);
    expect(caught).not.toBeNull();
    return caught!;
  }

  it('16 trajectories opened in a batch of 4,000 touch about as many buffers as in a batch of 200, planned either way', async () => {
    const small = await openInBatch(200);
    const large = await openInBatch(4_000);
    for (const generic of [true, false]) {
      const costs = { small: await buffersOf(fresh(small), generic), large: await buffersOf(fresh(large), generic) };
      // 20× the trajectories in the batch; an open that read the batch per trajectory touched over 10× the buffers.
      expect({ generic, ...costs, grew: costs.large > 2 * costs.small + 50 }).toEqual({ generic, ...costs, grew: false });
    }
  });
});
