import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One job's part of a consumer's inbox, in order: what a deciding service reads to bring back the state
 * of a job it evicted from memory when that job speaks again (without reading every other job's stream).
 */
export class InboxByJob1764000000000 implements MigrationInterface {
  name = 'InboxByJob1764000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX robustrl_inbox_job_stream ON robustrl_inbox (consumer, job_id, seq)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX robustrl_inbox_job_stream`);
  }
}
