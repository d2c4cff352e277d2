import { Logger } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { MessageBus } from '@robustrl/bus';
import {
  AppendOutcome,
  AppendResult,
  BatchProgress,
  CompletedBatch,
  Continuation,
  ContinuationDecision,
  createMessage,
  DataOf,
  NewTrajectory,
  RestartFromPromptReason,
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
import { EventStore } from '@robustrl/store';
import { encodeNul } from './jsonb-nul';
import { AcceptanceBound, decideContinuation, isAcceptable, staleness, trainingSample } from '@robustrl/request-manager-domain';
import { toStoredTurn, toSummary, TRAJECTORY_COLUMNS, TrajectoryRow, trajectoryRef, TURN_COLUMNS, TurnRow } from './trajectory-rows';

/** Durable append outcomes (the store's answers are the HTTP contract's shapes: libs/contracts http/trajectory-api.ts). */
export const DURABLE_OUTCOMES: ReadonlySet<AppendOutcome> = new Set(['new', 'duplicate']);

export interface PruneResult {
  trajectories: number;
  turns: number;
}

export class TrajectoryNotFoundError extends Error {
  constructor(readonly trajectoryId: string) {
    super(`trajectory '${trajectoryId}' is not stored`);
    this.name = 'TrajectoryNotFoundError';
  }
}

export class InvalidTransitionError extends Error {
  constructor(
    readonly trajectoryId: string,
    readonly from: TrajectoryStatus,
    readonly to: TrajectoryStatus,
  ) {
    super(`trajectory '${trajectoryId}' cannot go from ${from} to ${to}`);
    this.name = 'InvalidTransitionError';
  }
}

/** Completed and aborted are final: a trainer may already have consumed a completed trajectory. */
const TRANSITIONS: Record<TrajectoryStatus, readonly TrajectoryStatus[]> = {
  'in-flight': ['completed', 'reassigned', 'aborted'],
  reassigned: ['in-flight', 'completed', 'reassigned', 'aborted'],
  completed: [],
  aborted: [],
};

/**
 * One statement appends a whole batch of turns and keeps each trajectory's summary current:
 *  - `locked` takes the trajectories' row locks in id order, so concurrent appends (writer flushes, HTTP
 *    calls) touching the same trajectories queue instead of deadlocking, and read their latest status;
 *  - `ins` stores the turns of open trajectories (right attempt) and skips any turn id or index already
 *    stored (ON CONFLICT DO NOTHING: a redelivered append is a no-op);
 *  - `updated` folds only what was inserted into last turn index, owner, weight versions;
 *  - the final SELECT says, per input turn, what happened. Its sub-selects see the table as it was before
 *    the statement, which is what tells a duplicate (turn id already there) from a refused turn.
 */
const APPEND_SQL = `
WITH input AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(
    ord int, trajectory_id text, turn_id text, turn_index int, kind text, content jsonb, rollout_id text,
    weight_version int, tokens int, attempt int, spans jsonb)
),
locked AS (
  SELECT t.trajectory_id, t.job_id, t.batch_id, t.step, t.prompt_id, t.sample_index, t.status, t.attempt
    FROM robustrl_trajectories t
   WHERE t.trajectory_id IN (SELECT trajectory_id FROM input)
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
   WHERE t.trajectory_id = s.trajectory_id
  RETURNING t.trajectory_id
)
SELECT i.ord, (ins.turn_id IS NOT NULL) AS inserted, (l.trajectory_id IS NOT NULL) AS known,
       l.status, l.attempt, l.job_id, l.batch_id, l.step, l.prompt_id, l.sample_index,
       EXISTS (SELECT 1 FROM robustrl_trajectory_turns e WHERE e.turn_id = i.turn_id) AS existed,
       EXISTS (SELECT 1 FROM robustrl_trajectory_turns e
                WHERE e.trajectory_id = i.trajectory_id AND e.attempt = l.attempt AND e.turn_index = i.turn_index) AS index_taken,
       (SELECT count(*) FROM updated) AS updated_count
  FROM input i LEFT JOIN ins ON ins.turn_id = i.turn_id LEFT JOIN locked l ON l.trajectory_id = i.trajectory_id
 ORDER BY i.ord`;

interface AppendRow {
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
}

export interface TrajectoryStoreOptions {
  /** `source` of the events it publishes. */
  source?: string;
  clock?: () => Date;
  logger?: Pick<Logger, 'warn'>;
  /**
   * Writes return once committed, and their events go to the bus behind them (in commit order, many
   * per publish). The router records so (docs/router.md "Recording"): the events are notifications,
   * and a caller's answer must not wait for the broker. Default false: a write returns once its events
   * are published too.
   */
  publishInBackground?: boolean;
}

/** One trajectory's current attempt and its turns, as `prefixes` reads them. */
export interface AttemptPrefix {
  attempt: number;
  turns: StoredTurn[];
}

/** What the store publishes (the request manager's topic rights, libs/bus/src/kafka/topic-acls.ts). */
export const TRAJECTORY_STORE_OUTPUT_TYPES = ['TrajectoryTurnAppended', 'TrajectoryStatusChanged', 'TrajectoryRestartedFromPrompt'] as const;

/**
 * The request manager's trajectory store (paper §3, §5.2.2): every trajectory of an RL batch, turn by
 * turn, so a failed rollout's progress continues elsewhere and a restarted trainer fetches its batch.
 * Tables: this service's own migration 0003 (`../migrations`, handed to the store that runs it). SQL goes
 * through the EventStore's data source, on PostgreSQL and PGlite alike.
 *
 * Events: after a commit, `TrajectoryTurnAppended` (metadata only; content stays here) for each turn that
 * was new and `TrajectoryStatusChanged` for each status that changed — a repeated call publishes nothing.
 * They are notifications for the rollout manager, not the record: a crash between commit and publish loses
 * the notification, never the turn (routing every turn through the outbox would double the writes of the
 * hottest path). Publishes are serialized so one trajectory's events reach the bus in commit order; a bus
 * failure is logged and does not fail the (already durable) write.
 */
export class TrajectoryStore {
  private readonly source: string;
  private readonly clock: () => Date;
  private readonly logger: Pick<Logger, 'warn'>;
  private publishing: Promise<void> = Promise.resolve();
  private readonly publishInBackground: boolean;
  /** Events waiting for the publish in flight to end (background publishing sends them in one call). */
  private queued: RobustrlMessage[] = [];
  /** Statements that appended turns (one per appendTurns call); the TurnWriter's batching shows here. */
  appendStatements = 0;

  constructor(
    private readonly store: EventStore,
    private readonly bus?: MessageBus,
    options: TrajectoryStoreOptions = {},
  ) {
    this.source = options.source ?? 'request-manager';
    this.clock = options.clock ?? (() => new Date());
    this.logger = options.logger ?? new Logger('trajectory-store');
    this.publishInBackground = options.publishInBackground ?? false;
  }

  /** Idempotent: a trajectory id already stored for the same slot is `existing`; another id in that slot is a `conflict`. */
  async startTrajectories(trajectories: readonly NewTrajectory[]): Promise<StartResult[]> {
    if (trajectories.length === 0) return [];
    const rows: Array<{ ord: number; inserted: boolean; same_id: boolean }> = await this.store.dataSource.query(
      `WITH input AS (
         SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(
           ord int, trajectory_id text, job_id text, batch_id text, step int, prompt_id text, sample_index int, prompt jsonb, owner_rollout_id text)
       ),
       ins AS (
         INSERT INTO robustrl_trajectories (trajectory_id, job_id, batch_id, step, prompt_id, sample_index, prompt, owner_rollout_id)
         SELECT trajectory_id, job_id, batch_id, step, prompt_id, sample_index, prompt, owner_rollout_id FROM input ORDER BY ord
         ON CONFLICT DO NOTHING
         RETURNING trajectory_id
       )
       SELECT i.ord, (ins.trajectory_id IS NOT NULL) AS inserted,
              EXISTS (SELECT 1 FROM robustrl_trajectories e
                       WHERE e.trajectory_id = i.trajectory_id AND e.job_id = i.job_id AND e.batch_id = i.batch_id
                         AND e.prompt_id = i.prompt_id AND e.sample_index = i.sample_index) AS same_id
         FROM input i LEFT JOIN ins ON ins.trajectory_id = i.trajectory_id ORDER BY i.ord`,
      [
        JSON.stringify(
          trajectories.map((t, ord) => ({
            ord,
            trajectory_id: t.trajectoryId,
            job_id: t.jobId,
            batch_id: t.batchId,
            step: t.step,
            prompt_id: t.promptId,
            sample_index: t.sampleIndex,
            prompt: encodeNul(t.prompt),
            owner_rollout_id: t.ownerRolloutId ?? null,
          })),
        ),
      ],
    );
    const results = rows.map((r) => ({
      trajectoryId: trajectories[r.ord].trajectoryId,
      outcome: (r.inserted ? 'created' : r.same_id ? 'existing' : 'conflict') as StartOutcome,
    }));
    const created = trajectories.filter((_, i) => results[i].outcome === 'created');
    await this.publish(created.map((t) => this.statusEvent(t, 'in-flight')));
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
    const rows: AppendRow[] = await this.store.dataSource.query(APPEND_SQL, [JSON.stringify(payload)]);
    const events: RobustrlMessage[] = [];
    for (const r of rows) {
      const turn = turns[r.ord];
      const outcome = classify(r, turn);
      outcomes[r.ord] = outcome;
      if (outcome === 'new' && this.bus) {
        events.push(
          createMessage(
            'TrajectoryTurnAppended',
            {
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
            { jobId: r.job_id!, source: this.source, occurredAt: this.clock().toISOString() },
          ),
        );
      }
    }
    await this.publish(events);
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
      if (previous !== trajectory.status) events.push(this.statusEvent(trajectory, trajectory.status));
      if (continuation?.action === 'restart-from-prompt' && change.continuation) {
        // A restart drops what was generated: an event, so an operator can see which samples were thrown away and why.
        events.push(this.restartEvent(trajectory, continuation.reason, change.continuation, current.minWeightVersion ?? 0));
      }
      return { result: { trajectory, previous, changed: true, continuation }, events };
    });
    await this.publish(events);
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

  /**
   * The current attempt and its turns of each trajectory stored, in ONE statement (a consistent snapshot
   * without a transaction): what the router compares a request with. Trajectories not stored are absent.
   */
  async prefixes(trajectoryIds: readonly string[]): Promise<Map<string, AttemptPrefix>> {
    const found = new Map<string, AttemptPrefix>();
    if (trajectoryIds.length === 0) return found;
    const rows: Array<TurnRow & { t_id: string; t_attempt: number }> = await this.store.dataSource.query(
      `SELECT t.trajectory_id AS t_id, t.attempt AS t_attempt, ${TURN_COLUMNS}
         FROM robustrl_trajectories t
         LEFT JOIN robustrl_trajectory_turns u ON u.trajectory_id = t.trajectory_id AND u.attempt = t.attempt
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
    return this.publishing;
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

  private statusEvent(
    t: Pick<TrajectorySummary, 'trajectoryId' | 'jobId' | 'batchId' | 'step' | 'promptId' | 'sampleIndex'>,
    status: TrajectoryStatus,
  ): RobustrlMessage {
    const data: DataOf<'TrajectoryStatusChanged'> = { ...trajectoryRef(t), status };
    return createMessage('TrajectoryStatusChanged', data, { jobId: t.jobId, source: this.source, occurredAt: this.clock().toISOString() });
  }

  private restartEvent(t: TrajectorySummary, reason: RestartFromPromptReason, c: Continuation, droppedPolicyVersion: number): RobustrlMessage {
    const data: DataOf<'TrajectoryRestartedFromPrompt'> = {
      ...trajectoryRef(t),
      attempt: t.attempt,
      reason,
      policy: c.policy,
      droppedPolicyVersion,
      weightVersion: c.weightVersion,
      rolloutId: t.ownerRolloutId,
    };
    return createMessage('TrajectoryRestartedFromPrompt', data, { jobId: t.jobId, source: this.source, occurredAt: this.clock().toISOString() });
  }

  /**
   * Events go out in commit order. In the background, what piles up while one publish is in flight goes
   * out in the next, in one call: the broker sees a few large publishes, not one per write.
   */
  private publish(events: readonly RobustrlMessage[]): Promise<void> {
    if (!this.bus || events.length === 0) return this.publishInBackground ? Promise.resolve() : this.publishing;
    const bus = this.bus;
    const send = (batch: readonly RobustrlMessage[]) =>
      bus.publish(batch).catch((err: unknown) => {
        this.logger.warn(`could not publish ${batch.length} trajectory event(s); the store has them: ${err instanceof Error ? err.message : String(err)}`);
      });
    if (!this.publishInBackground) {
      this.publishing = this.publishing.then(() => send(events));
      return this.publishing;
    }
    const first = this.queued.length === 0;
    this.queued.push(...events);
    if (first) {
      this.publishing = this.publishing.then(() => {
        const batch = this.queued;
        this.queued = [];
        return send(batch);
      });
    }
    return Promise.resolve();
  }
}

function classify(r: AppendRow, turn: TurnInput): AppendOutcome {
  if (r.inserted) return 'new';
  if (r.existed) return 'duplicate';
  if (!r.known) return 'unknown-trajectory';
  if (r.status !== 'in-flight' && r.status !== 'reassigned') return 'closed';
  if (turn.attempt !== undefined && turn.attempt !== r.attempt) return 'stale-attempt';
  if (r.index_taken) return 'index-taken';
  // Not visible before the statement, yet not inserted: a concurrent append of the same turn id committed first.
  return 'duplicate';
}
