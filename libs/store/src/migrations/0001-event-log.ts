import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The append-only event log (after emmett's `emt_messages`) and consumer checkpoints
 * (after emmett's `emt_processors`).
 *
 * `transaction_id` lets readers skip positions whose transaction is still open: a BIGSERIAL is
 * handed out at insert, not at commit, so position 11 can become visible before position 10.
 * Reading only below the oldest running transaction (`pg_snapshot_xmin`) makes a forward scan never
 * skip an event for good.
 */
export class EventLog1763700000000 implements MigrationInterface {
  name = 'EventLog1763700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE robustrl_event_log (
        global_position BIGSERIAL PRIMARY KEY,
        event_id        UUID        NOT NULL UNIQUE,
        type            TEXT        NOT NULL,
        schema_version  INTEGER     NOT NULL,
        kind            TEXT        NOT NULL,
        job_id          TEXT        NOT NULL,
        source          TEXT        NOT NULL,
        occurred_at     TIMESTAMPTZ NOT NULL,
        causation_id    TEXT,
        correlation_id  TEXT        NOT NULL,
        trace           JSONB,
        data            JSONB       NOT NULL,
        transaction_id  XID8        NOT NULL DEFAULT pg_current_xact_id(),
        recorded_at     TIMESTAMPTZ NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX robustrl_event_log_job ON robustrl_event_log (job_id, global_position)`);
    await q.query(`CREATE INDEX robustrl_event_log_correlation ON robustrl_event_log (correlation_id, global_position)`);
    await q.query(`
      CREATE FUNCTION robustrl_event_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        RAISE EXCEPTION 'robustrl_event_log is append-only (% refused)', TG_OP;
      END $$`);
    await q.query(`
      CREATE TRIGGER robustrl_event_log_append_only BEFORE UPDATE OR DELETE ON robustrl_event_log
      FOR EACH ROW EXECUTE FUNCTION robustrl_event_log_append_only()`);
    await q.query(`
      CREATE TABLE robustrl_consumer_checkpoints (
        consumer   TEXT        NOT NULL,
        stream     TEXT        NOT NULL,
        position   BIGINT      NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, stream)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE robustrl_consumer_checkpoints`);
    await q.query(`DROP TABLE robustrl_event_log`);
    await q.query(`DROP FUNCTION robustrl_event_log_append_only()`);
  }
}
