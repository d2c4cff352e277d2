import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The request manager's trajectory store (paper §3, §5.2.2: every tool iteration preserved, so a
 * rollout failure or a trainer restart loses no generated turn).
 *
 * - `robustrl_trajectories`: one row per sample of a prompt in an RL batch. The summary columns
 *   (`last_turn_index`, `owner_rollout_id`, `min/max_weight_version`, `weight_versions`) are kept up to
 *   date by the statement that appends turns, so a batch fetch filters on staleness without reading turns.
 *   `attempt` counts restarts from the prompt: turns of an older attempt stay (their turn ids keep a
 *   late redelivery from being stored again) but are no longer part of the trajectory.
 * - `robustrl_trajectory_turns`: one row per model output, tool call or tool result. `turn_id` is the
 *   idempotency key of an append; the primary key orders a trajectory's turns and is what a batch fetch
 *   reads them by.
 *
 * Indexes: (job, batch, status) finds a batch's completed trajectories; (job, step) is what retention
 * deletes by. Turns go with their trajectory (ON DELETE CASCADE) so no orphan turn survives a prune.
 */
export class TrajectoryStore1763900000000 implements MigrationInterface {
  name = 'TrajectoryStore1763900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE robustrl_trajectories (
        trajectory_id      TEXT        PRIMARY KEY,
        job_id             TEXT        NOT NULL,
        batch_id           TEXT        NOT NULL,
        step               INTEGER     NOT NULL CHECK (step >= 0),
        prompt_id          TEXT        NOT NULL,
        sample_index       INTEGER     NOT NULL CHECK (sample_index >= 0),
        prompt             JSONB       NOT NULL,
        owner_rollout_id   TEXT,
        status             TEXT        NOT NULL DEFAULT 'in-flight'
                           CHECK (status IN ('in-flight', 'completed', 'reassigned', 'aborted')),
        attempt            INTEGER     NOT NULL DEFAULT 0,
        last_turn_index    INTEGER     NOT NULL DEFAULT -1,
        min_weight_version INTEGER,
        max_weight_version INTEGER,
        weight_versions    INTEGER[]   NOT NULL DEFAULT '{}',
        created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
        completed_at       TIMESTAMPTZ,
        UNIQUE (job_id, batch_id, prompt_id, sample_index)
      )`);
    await q.query(`CREATE INDEX robustrl_trajectories_batch ON robustrl_trajectories (job_id, batch_id, status)`);
    await q.query(`CREATE INDEX robustrl_trajectories_step ON robustrl_trajectories (job_id, step)`);
    await q.query(`
      CREATE TABLE robustrl_trajectory_turns (
        trajectory_id  TEXT        NOT NULL REFERENCES robustrl_trajectories (trajectory_id) ON DELETE CASCADE,
        attempt        INTEGER     NOT NULL,
        turn_index     INTEGER     NOT NULL CHECK (turn_index >= 0),
        turn_id        TEXT        NOT NULL UNIQUE,
        kind           TEXT        NOT NULL CHECK (kind IN ('model-output', 'tool-call', 'tool-result')),
        content        JSONB       NOT NULL,
        rollout_id     TEXT,
        weight_version INTEGER     NOT NULL CHECK (weight_version >= 0),
        tokens         INTEGER     NOT NULL CHECK (tokens >= 0),
        created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (trajectory_id, attempt, turn_index)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE robustrl_trajectory_turns`);
    await q.query(`DROP TABLE robustrl_trajectories`);
  }
}
