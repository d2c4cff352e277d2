import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Snapshots of deciding services (docs/contributors/snapshots.md): what a service loads on start
 * instead of folding its whole inbox.
 *
 * - `robustrl_job_snapshots`: per consumer and job, the decider state as of `inbox_seq` (the consumer's
 *   inbox had nothing newer for the job then), encoded by the decider's codec, as JSON text;
 *   `last_active_at` lets a start skip jobs long finished.
 * - `robustrl_consumer_snapshots`: per consumer, the bus positions its states cover (per topic/partition,
 *   the first offset not yet folded in) and the newest input time, written in the same transaction
 *   as the job rows it goes with.
 */
export class Snapshots1764200000000 implements MigrationInterface {
  name = 'Snapshots1764200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE robustrl_job_snapshots (
        consumer       TEXT        NOT NULL,
        job_id         TEXT        NOT NULL,
        inbox_seq      BIGINT      NOT NULL,
        state          TEXT        NOT NULL,
        last_active_at TIMESTAMPTZ NOT NULL,
        taken_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, job_id)
      )`);
    await q.query(`
      CREATE TABLE robustrl_consumer_snapshots (
        consumer        TEXT        PRIMARY KEY,
        inbox_seq       BIGINT      NOT NULL,
        positions       JSONB       NOT NULL,
        newest_input_at TIMESTAMPTZ,
        taken_at        TIMESTAMPTZ NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE robustrl_consumer_snapshots`);
    await q.query(`DROP TABLE robustrl_job_snapshots`);
  }
}
