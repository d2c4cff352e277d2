import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { EventStore } from '@robustrl/store';

/**
 * A fresh database on the real PostgreSQL server for one test file, so files running in parallel
 * never see each other's checkpoints. Dropped by the returned `drop`.
 */
export async function freshPostgresStore(): Promise<{ store: EventStore; drop(): Promise<void> }> {
  const base = process.env.DATABASE_URL;
  if (!base) throw new Error('DATABASE_URL is not set: integration tests run through the jest global setup');
  const name = `robustrl_test_${randomBytes(5).toString('hex')}`;
  const admin = new Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  const store = await EventStore.open({ kind: 'postgres', url: url.toString() });
  return {
    store,
    drop: async () => {
      await store.close();
      const c = new Client({ connectionString: base });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
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
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = new Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new Client({ connectionString: base });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
