import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Token-level preservation: a generated turn keeps what each engine sampled — token ids,
 * log-probs, the engine and weight version of each span (contracts `TokenSpan`). Nullable: tool results
 * and turns from engines that report no token ids have none, and rows stored before this migration keep
 * their text alone.
 */
export class TurnTokenSpans1795500000000 implements MigrationInterface {
  name = 'TurnTokenSpans1795500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE robustrl_trajectory_turns ADD COLUMN spans JSONB`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE robustrl_trajectory_turns DROP COLUMN spans`);
  }
}
