import { EntityManager } from 'typeorm';
import { MessageBus } from '@robustrl/bus';
import {
  AppendOutcome,
  AppendResult,
  BatchProgress,
  CompletedBatch,
  ContinuationDecision,
  NewTrajectory,
  RobustrlMessage,
  StartOutcome,
  StartResult,
  StatusChange,
  StatusResult,
  StoredTurn,
  TrajectoryPrefix,
  TrajectoryStatus,
  TrajectorySummary,
  TrajectoryWithTurns,
  TurnInput,
} from '@robustrl/contracts';
import { EventStore, queryPrepared } from '@robustrl/store';
import { encodeNul } from './jsonb-nul';
import { AttemptPrefix, OpenResult, openTrajectories, readPrefixes } from './trajectory-reads';
import { AppendedTurn, TrajectoryEventOptions, TrajectoryEvents } from './trajectory-events';
import { InvalidTransitionError, TrajectoryNotFoundError, TRANSITIONS } from './trajectory-errors';
import { APPEND_SQL, AppendRow, classify } from './turn-append-sql';
import { AcceptanceBound, decideContinuation, isAcceptable, staleness, trainingSample } from '@robustrl/request-manager-domain';
import { toStoredTurn, toSummary, START_CTES, TRAJECTORY_COLUMNS, trajectoryPayload, TrajectoryRow, TURN_COLUMNS, TurnRow } from './trajectory-rows';

/** Durable append outcomes (the store's answers are the HTTP contract's shapes: libs/contracts http/trajectory-api.ts). */
export const DURABLE_OUTCOMES: ReadonlySet<AppendOutcome> = new Set(['new', 'duplicate']);

export interface PruneResult {
  trajectories: number;
  turns: number;
}

/** The store's options are those of its announcements (trajectory-events.ts). */
export type TrajectoryStoreOptions = TrajectoryEventOptions;

/**
 * The request manager's trajectory store (paper §3, §5.2.2): every trajectory of an RL batch, turn by
 * turn, so a failed rollout's progress continues elsewhere and a restarted trainer fetches its batch.
 * Tables: this service's own migration 0003 (`../migrations`, handed to the store that runs it). SQL goes
 * through the EventStore's data source, on PostgreSQL and PGlite alike.
 *
 * Events: after a commit, `TrajectoryTurnAppended` (metadata only; content stays here) for each turn that
 * was new and `TrajectoryStatusChanged` for each status that changed — a repeated call publishes nothing.
 * They are notifications, not the record (trajectory-events.ts says what goes out, when, and in what order).
 */
export class TrajectoryStore {
  private readonly events: TrajectoryEvents;
  /** Statements that appended turns (one per appendTurns call); the TurnWriter's batching shows here. */
  appendStatements = 0;

  constructor(
    private readonly store: EventStore,
    bus?: MessageBus,
    options: TrajectoryStoreOptions = {},
  ) {
    this.events = new TrajectoryEvents(bus, options);
  }

  /** Idempotent: a trajectory id already stored for the same slot is `existing`; another id in that slot is a `conflict`. */
  async startTrajectories(trajectories: readonly NewTrajectory[]): Promise<StartResult[]> {
    if (trajectories.length === 0) return [];
    const rows: Array<{ ord: number; inserted: boolean; same_id: boolean }> = await this.store.dataSource.query(
      `WITH ${START_CTES}
       SELECT i.ord, (ins.trajectory_id IS NOT NULL) AS inserted,
              CASE WHEN ins.trajectory_id IS NULL THEN
                EXISTS (SELECT 1 FROM robustrl_trajectories e
                         WHERE e.trajectory_id = i.trajectory_id AND e.job_id = i.job_id AND e.batch_id = i.batch_id
                           AND e.prompt_id = i.prompt_id AND e.sample_index = i.sample_index)
              END AS same_id
         FROM input i LEFT JOIN ins ON ins.trajectory_id = i.trajectory_id ORDER BY i.ord`,
      [trajectoryPayload(trajectories)],
    );
    const results = rows.map((r) => ({
      trajectoryId: trajectories[r.ord].trajectoryId,
      outcome: (r.inserted ? 'created' : r.same_id ? 'existing' : 'conflict') as StartOutcome,
    }));
    await this.events.started(trajectories.filter((_, i) => results[i].outcome === 'created'));
    return results;
  }

  async startTrajectory(trajectory: NewTrajectory): Promise<StartOutcome> {
    return (await this.startTrajectories([trajectory]))[0].outcome;
  }

  /**
   * Append turns in ONE statement (see APPEND_SQL); returns, per input turn in order, what happened.
   * Turn ids repeated within the call count once (the later ones are `duplicate`); two turn ids for the
   * same index of a trajectory within the call: the later is `index-taken`.
   */
  async appendTurns(turns: readonly TurnInput[]): Promise<AppendResult[]> {
    if (turns.length === 0) return [];
    const outcomes: Array<AppendOutcome | null> = new Array(turns.length).fill(null);
    const seenTurnIds = new Set<string>();
    const seenSlots = new Set<string>();
    const payload: Array<Record<string, unknown>> = [];
    turns.forEach((t, ord) => {
      const slot = `${t.trajectoryId}\u0000${t.turnIndex}`;
      if (seenTurnIds.has(t.turnId)) outcomes[ord] = 'duplicate';
      else if (seenSlots.has(slot)) outcomes[ord] = 'index-taken';
      if (outcomes[ord] !== null) return;
      seenTurnIds.add(t.turnId);
      seenSlots.add(slot);
      payload.push({
        ord,
        trajectory_id: t.trajectoryId,
        turn_id: t.turnId,
        turn_index: t.turnIndex,
        kind: t.kind,
        content: encodeNul(t.content),
        rollout_id: t.rolloutId,
        weight_version: t.weightVersion,
        tokens: t.tokens,
        attempt: t.attempt ?? null,
        spans: t.spans ?? null,
      });
    });
    this.appendStatements += 1;
    const ids = [...new Set(payload.map((p) => p.trajectory_id as string))];
    const rows = await queryPrepared<AppendRow>(this.store.dataSource.manager, 'robustrl_trajectory_append', APPEND_SQL, [JSON.stringify(payload), ids]);
    const appended: AppendedTurn[] = [];
    for (const r of rows) {
      const turn = turns[r.ord];
      const outcome = classify(r, turn);
      outcomes[r.ord] = outcome;
      if (outcome !== 'new') continue;
      appended.push({
        jobId: r.job_id!,
        priorOwner: r.prior_owner,
        data: {
          trajectoryId: turn.trajectoryId,
          batchId: r.batch_id!,
          step: r.step!,
          promptId: r.prompt_id!,
          sampleIndex: r.sample_index!,
          turnId: turn.turnId,
          turnIndex: turn.turnIndex,
          kind: turn.kind,
          rolloutId: turn.rolloutId,
          weightVersion: turn.weightVersion,
          tokens: turn.tokens,
        },
      });
    }
    await this.events.appended(appended);
    return turns.map((t, i) => ({ turnId: t.turnId, outcome: outcomes[i]! }));
  }

  /**
   * Change a trajectory's status (idempotent: the current status again changes nothing, unless it
   * brings a new owner or a continuation). With `continuation`, the staleness policy decides whether
   * the generated turns are kept (new turns get the new version) or dropped (restart from the prompt:
   * a new attempt, the old turns kept only as idempotency keys).
   */
  async setStatus(trajectoryId: string, change: StatusChange): Promise<StatusResult> {
    const { result, events } = await this.store.transaction(async (m): Promise<{ result: StatusResult; events: RobustrlMessage[] }> => {
      const current = await this.lockTrajectory(m, trajectoryId);
      const previous = current.status;
      if (previous !== change.status && !TRANSITIONS[previous].includes(change.status)) {
        throw new InvalidTransitionError(trajectoryId, previous, change.status);
      }
      if (previous === change.status && TRANSITIONS[previous].length === 0) {
        return { result: { trajectory: current, previous, changed: false, continuation: null }, events: [] };
      }
      let continuation: ContinuationDecision | null = null;
      if (change.continuation) {
        const c = change.continuation;
        const bound = c.maxStaleness === undefined ? undefined : { maxStaleness: c.maxStaleness };
        continuation = decideContinuation(current.minWeightVersion, c.weightVersion, c.policy, bound);
      }
      const restart = continuation?.action === 'restart-from-prompt';
      const owner = change.rolloutId === undefined ? current.ownerRolloutId : change.rolloutId;
      const changed = previous !== change.status || owner !== current.ownerRolloutId || restart;
      // The outcome comes with the completion itself (one call): a repeated completion changes nothing,
      // so the first outcome given is the one kept.
      const outcome = previous !== change.status ? (change.outcome ?? null) : null;
      if (!changed) return { result: { trajectory: current, previous, changed: false, continuation }, events: [] };
      // Wrapped in a CTE so both drivers return plain rows (TypeORM returns [rows, count] for a bare UPDATE).
      const rows: TrajectoryRow[] = await m.query(
        `WITH t AS (UPDATE robustrl_trajectories t
            SET status = $2, owner_rollout_id = $3, updated_at = now(),
                completed_at = CASE WHEN $2 IN ('completed', 'aborted') THEN now() ELSE NULL END,
                attempt = CASE WHEN $4 THEN t.attempt + 1 ELSE t.attempt END,
                last_turn_index = CASE WHEN $4 THEN -1 ELSE t.last_turn_index END,
                min_weight_version = CASE WHEN $4 THEN NULL ELSE t.min_weight_version END,
                max_weight_version = CASE WHEN $4 THEN NULL ELSE t.max_weight_version END,
                weight_versions = CASE WHEN $4 THEN '{}' ELSE t.weight_versions END,
                reward = CASE WHEN $5 THEN $6::double precision ELSE t.reward END,
                metadata = CASE WHEN $5 THEN $7::jsonb ELSE t.metadata END
          WHERE t.trajectory_id = $1
      RETURNING t.*)
         SELECT ${TRAJECTORY_COLUMNS} FROM t`,
        [
          trajectoryId,
          change.status,
          owner,
          restart,
          outcome !== null,
          outcome?.reward ?? null,
          outcome?.metadata === undefined ? null : JSON.stringify(encodeNul(outcome.metadata)),
        ],
      );
      const trajectory = toSummary(rows[0]);
      const events: RobustrlMessage[] = [];
      if (previous !== trajectory.status) events.push(this.events.statusChanged(trajectory, trajectory.status));
      if (continuation?.action === 'restart-from-prompt' && change.continuation) {
        // A restart drops what was generated: an event, so an operator can see which samples were thrown away and why.
        events.push(this.events.restarted(trajectory, continuation.reason, change.continuation, current.minWeightVersion ?? 0));
      }
      return { result: { trajectory, previous, changed: true, continuation }, events };
    });
    await this.events.publish(events);
    return result;
  }

  /** The trajectory with the turns of its current attempt, in order; null when not stored. */
  async trajectory(trajectoryId: string): Promise<TrajectoryWithTurns | null> {
    return this.store.dataSource.transaction('REPEATABLE READ', async (m) => {
      const rows: TrajectoryRow[] = await m.query(`SELECT ${TRAJECTORY_COLUMNS} FROM robustrl_trajectories t WHERE t.trajectory_id = $1`, [trajectoryId]);
      if (rows.length === 0) return null;
      const summary = toSummary(rows[0]);
      return { ...summary, turns: (await this.turnsOf(m, [trajectoryId])).get(trajectoryId) ?? [] };
    });
  }

  /** The current attempt and its turns of each trajectory stored, in one statement (trajectory-reads.ts). */
  prefixes(trajectoryIds: readonly string[]): Promise<Map<string, AttemptPrefix>> {
    return readPrefixes(this.store.dataSource, trajectoryIds);
  }

  /**
   * Start the trajectories not stored and read the prefixes of those that are, in one statement
   * (trajectory-reads.ts). Created ones are announced as startTrajectories does, unless notifications
   * are for ownership only.
   */
  async openTrajectories(trajectories: readonly NewTrajectory[]): Promise<OpenResult[]> {
    const results = await openTrajectories(this.store.dataSource, trajectories);
    await this.events.started(trajectories.filter((_, i) => results[i].outcome === 'created'));
    return results;
  }

  /** What a continuation on another rollout starts from: the prompt (in the summary) and the turns so far. */
  async prefix(trajectoryId: string): Promise<TrajectoryPrefix> {
    const found = await this.trajectory(trajectoryId);
    if (!found) throw new TrajectoryNotFoundError(trajectoryId);
    const { turns, ...trajectory } = found;
    return { trajectory, turns, resumeFromTurn: trajectory.lastTurnIndex + 1 };
  }

  /**
   * For a (restarted) trainer: exactly the completed trajectories of the batch, with their turns, that
   * are within the staleness bound at `currentWeightVersion` (judged by the oldest generated turn, see
   * staleness-policy.ts). One snapshot, so a trajectory completing meanwhile is either fully in or out.
   */
  async completedOfBatch(jobId: string, batchId: string, options: { currentWeightVersion: number; acceptance: AcceptanceBound }): Promise<CompletedBatch> {
    return this.store.dataSource.transaction('REPEATABLE READ', async (m) => {
      const rows: TrajectoryRow[] = await m.query(
        `SELECT ${TRAJECTORY_COLUMNS} FROM robustrl_trajectories t
          WHERE t.job_id = $1 AND t.batch_id = $2 AND t.status = 'completed'
          ORDER BY t.prompt_id, t.sample_index`,
        [jobId, batchId],
      );
      const accepted: TrajectorySummary[] = [];
      const stale: CompletedBatch['stale'] = [];
      for (const row of rows) {
        const t = toSummary(row);
        if (isAcceptable(t.minWeightVersion, options.currentWeightVersion, options.acceptance)) accepted.push(t);
        else stale.push({ trajectoryId: t.trajectoryId, staleness: staleness(t.minWeightVersion, options.currentWeightVersion) });
      }
      const turns = await this.turnsOf(
        m,
        accepted.map((t) => t.trajectoryId),
      );
      const trajectories = accepted.map((t) => ({ ...t, turns: turns.get(t.trajectoryId) ?? [] }));
      const samples = trajectories.map((t) => ({ trajectoryId: t.trajectoryId, ...trainingSample(t) }));
      return { trajectories, samples, stale };
    });
  }

  async batchProgress(jobId: string, batchId: string): Promise<BatchProgress> {
    const rows: Array<{ status: TrajectoryStatus; n: string }> = await this.store.dataSource.query(
      `SELECT status, count(*)::text AS n FROM robustrl_trajectories WHERE job_id = $1 AND batch_id = $2 GROUP BY status`,
      [jobId, batchId],
    );
    const progress: BatchProgress = { 'in-flight': 0, completed: 0, reassigned: 0, aborted: 0, total: 0 };
    for (const r of rows) {
      progress[r.status] = Number(r.n);
      progress.total += Number(r.n);
    }
    return progress;
  }

  /**
   * Retention: completed and aborted trajectories of steps at or before `currentStep − keepSteps` are
   * deleted with their turns (so with keepSteps 2 at step 10, steps 9 and 10 stay). In-flight and
   * reassigned ones are never deleted here: in async training a trajectory may outlive several steps,
   * and its progress is what this store exists to keep; it goes once it ends and falls out of the window.
   */
  async prune(options: { jobId: string; keepSteps: number; currentStep: number }): Promise<PruneResult> {
    const lastPrunedStep = options.currentStep - options.keepSteps;
    if (lastPrunedStep < 0) return { trajectories: 0, turns: 0 };
    return this.store.transaction(async (m) => {
      const doomed = `SELECT trajectory_id FROM robustrl_trajectories
                       WHERE job_id = $1 AND step <= $2 AND status IN ('completed', 'aborted')`;
      const turns: Array<{ n: string }> = await m.query(
        `WITH gone AS (DELETE FROM robustrl_trajectory_turns WHERE trajectory_id IN (${doomed}) RETURNING 1)
         SELECT count(*)::text AS n FROM gone`,
        [options.jobId, lastPrunedStep],
      );
      const trajectories: Array<{ n: string }> = await m.query(
        `WITH gone AS (DELETE FROM robustrl_trajectories WHERE trajectory_id IN (${doomed}) RETURNING 1)
         SELECT count(*)::text AS n FROM gone`,
        [options.jobId, lastPrunedStep],
      );
      return { trajectories: Number(trajectories[0].n), turns: Number(turns[0].n) };
    });
  }

  /** Resolves once every event handed to the bus so far was published (or failed and was logged). */
  drainPublishes(): Promise<void> {
    return this.events.drain();
  }

  private async lockTrajectory(m: EntityManager, trajectoryId: string): Promise<TrajectorySummary> {
    const rows: TrajectoryRow[] = await m.query(`SELECT ${TRAJECTORY_COLUMNS} FROM robustrl_trajectories t WHERE t.trajectory_id = $1 FOR UPDATE`, [
      trajectoryId,
    ]);
    if (rows.length === 0) throw new TrajectoryNotFoundError(trajectoryId);
    return toSummary(rows[0]);
  }

  /** Turns of the trajectories' current attempts, in order. */
  private async turnsOf(m: EntityManager, trajectoryIds: readonly string[]): Promise<Map<string, StoredTurn[]>> {
    const byTrajectory = new Map<string, StoredTurn[]>();
    if (trajectoryIds.length === 0) return byTrajectory;
    const rows: TurnRow[] = await m.query(
      `SELECT ${TURN_COLUMNS} FROM robustrl_trajectory_turns u
         JOIN robustrl_trajectories t ON t.trajectory_id = u.trajectory_id AND t.attempt = u.attempt
        WHERE t.trajectory_id = ANY($1::text[])
        ORDER BY u.trajectory_id, u.turn_index`,
      [trajectoryIds],
    );
    for (const r of rows) {
      let list = byTrajectory.get(r.trajectory_id);
      if (!list) byTrajectory.set(r.trajectory_id, (list = []));
      list.push(toStoredTurn(r));
    }
    return byTrajectory;
  }
}
