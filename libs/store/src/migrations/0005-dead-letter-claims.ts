import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Which consumer group dead-letters each bad record (DeadLetterLedger in libs/bus): one row per record
 * (the stream names the broker topic, or an in-process bus instance and its topic), so a record every
 * group reads is dead-lettered once, not once per group and per restart.
 */
export class DeadLetterClaims1764100000000 implements MigrationInterface {
  name = 'DeadLetterClaims1764100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE robustrl_dead_letter_claims (
        stream         TEXT        NOT NULL,
        partition_no   INTEGER     NOT NULL,
        record_offset  TEXT        NOT NULL,
        consumer_group TEXT        NOT NULL,
        claimed_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (stream, partition_no, record_offset)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE robustrl_dead_letter_claims`);
  }
}
