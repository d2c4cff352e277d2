import { DataSource, DataSourceOptions } from 'typeorm';
import { STORE_MIGRATIONS, StoreMigration } from './migrations';
import { pgliteDriver } from './pglite/pglite-pool';
import { DATABASE_URL, PGLITE_DIR } from './store-settings';

/** PostgreSQL server when `DATABASE_URL` is set; otherwise PGlite in this process (embedded mode). */
export type StoreConfig = { kind: 'postgres'; url: string; poolSize?: number } | { kind: 'pglite'; dataDir?: string };

export function storeConfigFromEnv(env: NodeJS.ProcessEnv): StoreConfig {
  const url = DATABASE_URL.read(env);
  if (url !== undefined) return { kind: 'postgres', url };
  return { kind: 'pglite', dataDir: PGLITE_DIR.read(env) };
}

export interface OpenedDataSource {
  dataSource: DataSource;
  close(): Promise<void>;
}

/**
 * Open the data source and bring its schema up to date: the store's own migrations, then `migrations`
 * (a service's own tables), ordered together by their timestamps.
 */
export async function openDataSource(config: StoreConfig, migrations: readonly StoreMigration[] = []): Promise<OpenedDataSource> {
  const all = [...STORE_MIGRATIONS, ...migrations];
  if (config.kind === 'postgres') {
    const dataSource = new DataSource({
      type: 'postgres',
      url: config.url,
      migrations: all,
      migrationsTableName: 'robustrl_migrations',
      // Each migration in its own transaction: a failure leaves the earlier ones applied, not half of one.
      migrationsTransactionMode: 'each',
      extra: { max: config.poolSize ?? 10 },
    });
    await dataSource.initialize();
    await migrateSerialized(dataSource);
    return { dataSource, close: () => dataSource.destroy() };
  }
  const { PGlite } = await import('@electric-sql/pglite');
  const db = await PGlite.create(config.dataDir ? { dataDir: config.dataDir } : undefined);
  const dataSource = new DataSource({
    type: 'postgres',
    driver: pgliteDriver(db),
    migrations: all,
    migrationsTableName: 'robustrl_migrations',
    migrationsTransactionMode: 'each',
  });
  await dataSource.initialize();
  await dataSource.runMigrations();
  return {
    dataSource,
    close: async () => {
      await dataSource.destroy();
      await db.close();
    },
  };
}

/**
 * Run `migrations` on an open data source (a service's own tables, after the store opened with its
 * core ones). TypeORM runs the migrations a data source was built with, so a short-lived second one
 * runs these, with the same options: the same database and migrations table, and on PGlite the same
 * driver, whose lease keeps its statements from interleaving with the open data source's.
 */
export async function runServiceMigrations(open: DataSource, backend: StoreConfig['kind'], migrations: readonly StoreMigration[]): Promise<void> {
  if (migrations.length === 0) return;
  const runner = new DataSource({ ...open.options, migrations: [...migrations] } as DataSourceOptions);
  await runner.initialize();
  try {
    if (backend === 'postgres') await migrateSerialized(runner);
    else await runner.runMigrations();
  } finally {
    await runner.destroy();
  }
}

/**
 * Several services may start at once against one database; an advisory lock makes exactly one of
 * them run the migrations while the others wait and then find nothing to do.
 */
async function migrateSerialized(dataSource: DataSource): Promise<void> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query(`SELECT pg_advisory_lock(hashtext('robustrl_migrations'))`);
    await dataSource.runMigrations();
  } finally {
    await runner.query(`SELECT pg_advisory_unlock(hashtext('robustrl_migrations'))`).catch(() => undefined);
    await runner.release();
  }
}
