import { NewTrajectory, StoredTurn } from '@robustrl/contracts';
import { queryPrepared } from '@robustrl/store';
import { DataSource } from 'typeorm';
import { START_CTES, toStoredTurn, trajectoryPayload, TURN_COLUMNS, TurnRow } from './trajectory-rows';

/** One trajectory's current attempt and its turns, as the router reads them. */
export interface AttemptPrefix {
  attempt: number;
  turns: StoredTurn[];
}

/**
 * What opening a trajectory found: it was `created` now (no turns yet), or `existing` with its prefix;
 * `conflict`: another trajectory id holds its slot (job, batch, prompt, sample) or the id holds another
 * slot; `busy`: an open of the same id by someone else committed while this one ran (ask again).
 */
export type OpenResult = { outcome: 'created' | 'existing'; prefix: AttemptPrefix } | { outcome: 'conflict' | 'busy' };

/**
 * The current attempt and its turns of each trajectory stored, in ONE statement (a consistent snapshot
 * without a transaction): what the router compares a request with. Trajectories not stored are absent.
 */
export async function readPrefixes(dataSource: DataSource, trajectoryIds: readonly string[]): Promise<Map<string, AttemptPrefix>> {
  const found = new Map<string, AttemptPrefix>();
  if (trajectoryIds.length === 0) return found;
  const rows = await queryPrepared<TurnRow & { t_id: string; t_attempt: number }>(
    dataSource.manager,
    'robustrl_trajectory_prefixes',
    `SELECT t.trajectory_id AS t_id, t.attempt AS t_attempt, ${TURN_COLUMNS}
       FROM robustrl_trajectories t
       LEFT JOIN robustrl_trajectory_turns u ON u.trajectory_id = t.trajectory_id AND u.attempt = t.attempt AND u.trajectory_id = ANY($1::text[])
      WHERE t.trajectory_id = ANY($1::text[])
      ORDER BY t.trajectory_id, u.turn_index`,
    [trajectoryIds],
  );
  for (const r of rows) {
    let prefix = found.get(r.t_id);
    if (!prefix) found.set(r.t_id, (prefix = { attempt: r.t_attempt, turns: [] }));
    if (r.turn_id !== null) prefix.turns.push(toStoredTurn(r));
  }
  return found;
}

/**
 * Start each trajectory that is not stored and read the prefix of each that is, in ONE statement: the
 * router's first call for a request (docs/router.md "Recording"). The SELECT sees the tables as they were
 * before the statement, so an existing trajectory comes with its turns and a created one has none. A
 * trajectory id given twice is opened once (the later ones read what the first found).
 *
 * Who holds the slot is asked only of a trajectory neither inserted nor stored under its id (CASE is
 * evaluated lazily): on a young table the planner answered that sub-select through the (job, batch,
 * status) index and filtered every trajectory of the batch, once per trajectory opened — a statement
 * of 30 opens took 46 ms at 4,500 trajectories a batch (docs/benchmarks.md "The router on every request").
 */
export async function openTrajectories(dataSource: DataSource, trajectories: readonly NewTrajectory[]): Promise<OpenResult[]> {
  if (trajectories.length === 0) return [];
  const firstOf = new Map<string, number>();
  trajectories.forEach((t, i) => {
    if (!firstOf.has(t.trajectoryId)) firstOf.set(t.trajectoryId, i);
  });
  const unique = [...firstOf.values()].map((i) => trajectories[i]);
  const rows = await queryPrepared<
    TurnRow & { ord: number; inserted: boolean; seen: boolean; same_slot: boolean | null; slot_taken: boolean | null; t_attempt: number | null }
  >(
    dataSource.manager,
    'robustrl_trajectory_open',
    `WITH ${START_CTES}
     SELECT i.ord, (ins.trajectory_id IS NOT NULL) AS inserted, (t.trajectory_id IS NOT NULL) AS seen,
            (t.job_id = i.job_id AND t.batch_id = i.batch_id AND t.prompt_id = i.prompt_id AND t.sample_index = i.sample_index) AS same_slot,
            CASE WHEN ins.trajectory_id IS NULL AND t.trajectory_id IS NULL THEN
              EXISTS (SELECT 1 FROM robustrl_trajectories e
                       WHERE e.job_id = i.job_id AND e.batch_id = i.batch_id AND e.prompt_id = i.prompt_id
                         AND e.sample_index = i.sample_index AND e.trajectory_id <> i.trajectory_id)
            END AS slot_taken,
            t.attempt AS t_attempt, ${TURN_COLUMNS}
       FROM input i
       LEFT JOIN ins ON ins.trajectory_id = i.trajectory_id
       LEFT JOIN robustrl_trajectories t ON t.trajectory_id = i.trajectory_id AND t.trajectory_id = ANY($2::text[])
       LEFT JOIN robustrl_trajectory_turns u ON u.trajectory_id = t.trajectory_id AND u.attempt = t.attempt AND u.trajectory_id = ANY($2::text[])
      ORDER BY i.ord, u.turn_index`,
    [
      trajectoryPayload(unique),
      // The ids again, as an array: the keys the planner looks up (turn-append-sql.ts says why).
      unique.map((t) => t.trajectoryId),
    ],
  );
  const byOrd = new Map<number, OpenResult>();
  for (const r of rows) {
    let result = byOrd.get(r.ord);
    if (!result) {
      if (r.inserted) result = { outcome: 'created', prefix: { attempt: 0, turns: [] } };
      else if (r.seen && r.same_slot) result = { outcome: 'existing', prefix: { attempt: r.t_attempt!, turns: [] } };
      else if (r.seen || r.slot_taken) result = { outcome: 'conflict' };
      // Not inserted, yet no row of that id or slot before the statement: a concurrent open of the same id committed first.
      else result = { outcome: 'busy' };
      byOrd.set(r.ord, result);
    }
    if (result.outcome === 'existing' && r.turn_id !== null) result.prefix.turns.push(toStoredTurn(r));
  }
  const ordOf = new Map([...firstOf.keys()].map((id, ord) => [id, ord]));
  return trajectories.map((t) => byOrd.get(ordOf.get(t.trajectoryId)!)!);
}
