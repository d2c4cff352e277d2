import { randomBytes } from 'node:crypto';
import { Client } from 'pg';

/**
 * A new, empty database on the PostgreSQL server of `baseUrl`, for a test or benchmark run that must
 * not see another run's checkpoints and inbox (they are keyed by consumer name, not by topic prefix).
 * `drop` removes it, even with connections still open.
 */
export async function createScratchDatabase(baseUrl: string, prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  if (!/^[a-z_][a-z0-9_]*$/.test(prefix)) throw new Error(`database name prefix must be a lower-case identifier, got ${JSON.stringify(prefix)}`);
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = async (sql: string) => {
    const c = new Client({ connectionString: baseUrl });
    await c.connect();
    try {
      await c.query(sql);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(baseUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
