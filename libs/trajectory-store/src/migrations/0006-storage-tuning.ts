import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * How the trajectory store's rows are kept on disk, for what the router writes on every request
 * (docs/router.md "Recording", measured in docs/benchmarks.md "The router on every request"):
 *  - `fillfactor` 80 on trajectories: each page keeps room, so the summary update of every append
 *    (last turn index, owner, weight versions, none of them indexed) is a heap-only update. On full pages
 *    seven updates in ten were not, and each of those wrote an entry into all four of the table's indexes.
 *  - LZ4 for the large JSONB columns (a turn's content and token spans, a trajectory's prompt), where the
 *    server has it (PostgreSQL 14 and later, built with lz4, as Debian's is): a turn whose spans carry its
 *    prompt's token ids passes the 2 KB at which PostgreSQL compresses, and pglz took a tenth of the
 *    server's CPU under the router's load. Values stored before keep their compression; PostgreSQL reads both.
 * Neither changes what is stored or read.
 */
export class StorageTuning1795700000000 implements MigrationInterface {
  name = 'StorageTuning1795700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE robustrl_trajectories SET (fillfactor = 80)`);
    await q.query(`
      DO $$ BEGIN
        IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
          ALTER TABLE robustrl_trajectory_turns ALTER COLUMN content SET COMPRESSION lz4, ALTER COLUMN spans SET COMPRESSION lz4;
          ALTER TABLE robustrl_trajectories ALTER COLUMN prompt SET COMPRESSION lz4;
        END IF;
      END $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE robustrl_trajectories RESET (fillfactor)`);
    await q.query(`
      DO $$ BEGIN
        IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression') THEN
          ALTER TABLE robustrl_trajectory_turns ALTER COLUMN content SET COMPRESSION DEFAULT, ALTER COLUMN spans SET COMPRESSION DEFAULT;
          ALTER TABLE robustrl_trajectories ALTER COLUMN prompt SET COMPRESSION DEFAULT;
        END IF;
      END $$`);
  }
}
