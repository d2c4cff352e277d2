import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A completed trajectory's outcome (docs/integrators/trajectories.md "Tokens in, tokens out"): the reward its environment gave it
 * and the job's metadata, handed to the trainer with the kept batch. Nullable: trajectories completed
 * without one, and every row stored before this migration, have none.
 */
export class TrajectoryOutcome1795600000000 implements MigrationInterface {
  name = 'TrajectoryOutcome1795600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE robustrl_trajectories ADD COLUMN reward DOUBLE PRECISION, ADD COLUMN metadata JSONB`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE robustrl_trajectories DROP COLUMN reward, DROP COLUMN metadata`);
  }
}
