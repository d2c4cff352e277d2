import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * When a claimed dead letter was written: a deciding service consumes again from its last snapshot
 * after a restart or a reload, and meets the bad records it already dead-lettered; a written claim
 * tells it not to write them again (a claim never marked written is written again, as before).
 */
export class DeadLetterWritten1764300000000 implements MigrationInterface {
  name = 'DeadLetterWritten1764300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE robustrl_dead_letter_claims ADD COLUMN written_at TIMESTAMPTZ`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE robustrl_dead_letter_claims DROP COLUMN written_at`);
  }
}
