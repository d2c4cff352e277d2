import { createScratchDatabase, EventStore, StoreMigration } from '@robustrl/store';

/**
 * A fresh database on the real PostgreSQL server for one test file, so files running in parallel
 * never see each other's checkpoints. Dropped by the returned `drop`. `migrations`: the tables of the
 * service under test (the store creates only its own).
 */
export async function freshPostgresStore(options: { migrations?: readonly StoreMigration[] } = {}): Promise<{ store: EventStore; drop(): Promise<void> }> {
  const db = await freshDatabaseUrl('robustrl_test');
  const store = await EventStore.open({ kind: 'postgres', url: db.url }, options);
  return {
    store,
    drop: async () => {
      await store.close();
      await db.drop();
    },
  };
}

/**
 * A fresh, empty database on the real PostgreSQL server for services a test starts itself (they
 * connect by URL and migrate it); `drop` removes it, even with connections still open.
 */
export async function freshDatabaseUrl(prefix = 'robustrl_e2e'): Promise<{ url: string; drop(): Promise<void> }> {
  const base = process.env.DATABASE_URL;
  if (!base) throw new Error('DATABASE_URL is not set: integration tests run through the jest global setup');
  return createScratchDatabase(base, prefix);
}
