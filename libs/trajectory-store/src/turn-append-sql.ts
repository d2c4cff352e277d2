import { AppendOutcome, TrajectoryStatus, TurnInput } from '@robustrl/contracts';

/**
 * One statement appends a whole batch of turns and keeps each trajectory's summary current:
 *  - `locked` takes the trajectories' row locks in id order, so concurrent appends (writer flushes, HTTP
 *    calls) touching the same trajectories queue instead of deadlocking, and read their latest status;
 *  - `ins` stores the turns of open trajectories (right attempt) and skips any turn id or index already
 *    stored (ON CONFLICT DO NOTHING: a redelivered append is a no-op);
 *  - `updated` folds only what was inserted into last turn index, owner, weight versions;
 *  - `$2` is the trajectory ids of `$1` again: the planner estimates a jsonb_to_recordset at 100 rows
 *    and would join a young table by scanning it whole, where the array gives it the keys to look up;
 *  - the final SELECT says, per input turn, what happened. Its sub-selects see the table as it was before
 *    the statement, which is what tells a duplicate (turn id already there) from a refused turn.
 */
export const APPEND_SQL = `
WITH input AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(
    ord int, trajectory_id text, turn_id text, turn_index int, kind text, content jsonb, rollout_id text,
    weight_version int, tokens int, attempt int, spans jsonb)
),
locked AS (
  SELECT t.trajectory_id, t.job_id, t.batch_id, t.step, t.prompt_id, t.sample_index, t.status, t.attempt, t.owner_rollout_id
    FROM robustrl_trajectories t
   WHERE t.trajectory_id = ANY($2::text[])
   ORDER BY t.trajectory_id
     FOR UPDATE
),
ins AS (
  INSERT INTO robustrl_trajectory_turns (trajectory_id, attempt, turn_index, turn_id, kind, content, rollout_id, weight_version, tokens, spans)
  SELECT i.trajectory_id, l.attempt, i.turn_index, i.turn_id, i.kind, i.content, i.rollout_id, i.weight_version, i.tokens, i.spans
    FROM input i JOIN locked l ON l.trajectory_id = i.trajectory_id
   WHERE l.status IN ('in-flight', 'reassigned') AND (i.attempt IS NULL OR i.attempt = l.attempt)
   ORDER BY i.ord
  ON CONFLICT DO NOTHING
  RETURNING trajectory_id, turn_id, turn_index, kind, rollout_id, weight_version
),
summary AS (
  SELECT trajectory_id,
         max(turn_index) AS last_index,
         (array_agg(rollout_id ORDER BY turn_index DESC) FILTER (WHERE rollout_id IS NOT NULL))[1] AS newest_rollout,
         max(turn_index) FILTER (WHERE rollout_id IS NOT NULL) AS newest_rollout_index,
         min(weight_version) FILTER (WHERE kind <> 'tool-result') AS min_v,
         max(weight_version) FILTER (WHERE kind <> 'tool-result') AS max_v,
         array_agg(DISTINCT weight_version) AS versions
    FROM ins GROUP BY trajectory_id
),
updated AS (
  UPDATE robustrl_trajectories t
     SET last_turn_index = GREATEST(t.last_turn_index, s.last_index),
         owner_rollout_id = CASE WHEN s.newest_rollout_index >= t.last_turn_index THEN s.newest_rollout ELSE t.owner_rollout_id END,
         min_weight_version = LEAST(t.min_weight_version, s.min_v),
         max_weight_version = GREATEST(t.max_weight_version, s.max_v),
         weight_versions = ARRAY(SELECT DISTINCT w FROM unnest(t.weight_versions || s.versions) AS w ORDER BY w),
         updated_at = now()
    FROM summary s
   WHERE t.trajectory_id = s.trajectory_id AND t.trajectory_id = ANY($2::text[])
  RETURNING t.trajectory_id
)
SELECT i.ord, (ins.turn_id IS NOT NULL) AS inserted, (l.trajectory_id IS NOT NULL) AS known,
       l.status, l.attempt, l.job_id, l.batch_id, l.step, l.prompt_id, l.sample_index, l.owner_rollout_id AS prior_owner,
       EXISTS (SELECT 1 FROM robustrl_trajectory_turns e WHERE e.turn_id = i.turn_id AND e.trajectory_id = ANY($2::text[])) AS existed,
       EXISTS (SELECT 1 FROM robustrl_trajectory_turns e
                WHERE e.trajectory_id = i.trajectory_id AND e.attempt = l.attempt AND e.turn_index = i.turn_index
                  AND e.trajectory_id = ANY($2::text[])) AS index_taken,
       (SELECT count(*) FROM updated) AS updated_count
  FROM input i LEFT JOIN ins ON ins.turn_id = i.turn_id LEFT JOIN locked l ON l.trajectory_id = i.trajectory_id
 ORDER BY i.ord`;

export interface AppendRow {
  ord: number;
  inserted: boolean;
  known: boolean;
  status: TrajectoryStatus | null;
  attempt: number | null;
  job_id: string | null;
  batch_id: string | null;
  step: number | null;
  prompt_id: string | null;
  sample_index: number | null;
  existed: boolean;
  index_taken: boolean;
  /** The trajectory's owner before the statement. */
  prior_owner: string | null;
}

/** What happened to one input turn of APPEND_SQL, from its result row. */
export function classify(r: AppendRow, turn: TurnInput): AppendOutcome {
  if (r.inserted) return 'new';
  if (r.existed) return 'duplicate';
  if (!r.known) return 'unknown-trajectory';
  if (r.status !== 'in-flight' && r.status !== 'reassigned') return 'closed';
  if (turn.attempt !== undefined && turn.attempt !== r.attempt) return 'stale-attempt';
  if (r.index_taken) return 'index-taken';
  // Not visible before the statement, yet not inserted: a concurrent append of the same turn id committed first.
  return 'duplicate';
}
