import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Inbox and outbox of deciding services (after nestjs/outbox).
 *
 * - `robustrl_inbox`: per consumer, every message it applied — inputs and its own outputs — in the
 *   order applied. It de-duplicates by event id (a message re-published at a new offset is still
 *   applied once) and is the stream a service's state is rebuilt from after a restart: the decider's
 *   fold over exactly what it saw, in the order it saw it.
 * - `robustrl_outbox`: messages a service decided, written in the same transaction as the decision and
 *   relayed to the bus afterwards, so a crash between the two loses nothing and publishes nothing
 *   that was not decided.
 */
export class InboxOutbox1763800000000 implements MigrationInterface {
  name = 'InboxOutbox1763800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE robustrl_inbox (
        consumer   TEXT        NOT NULL,
        event_id   UUID        NOT NULL,
        job_id     TEXT        NOT NULL,
        seq        BIGSERIAL   NOT NULL,
        applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, event_id)
      )`);
    await q.query(`CREATE INDEX robustrl_inbox_stream ON robustrl_inbox (consumer, seq)`);
    await q.query(`
      CREATE TABLE robustrl_outbox (
        position     BIGSERIAL   PRIMARY KEY,
        consumer     TEXT        NOT NULL,
        event_id     UUID        NOT NULL UNIQUE,
        message      JSONB       NOT NULL,
        created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
        published_at TIMESTAMPTZ
      )`);
    await q.query(`CREATE INDEX robustrl_outbox_pending ON robustrl_outbox (consumer, position) WHERE published_at IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE robustrl_outbox`);
    await q.query(`DROP TABLE robustrl_inbox`);
  }
}
