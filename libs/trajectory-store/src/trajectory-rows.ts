import type { NewTrajectory, StoredTurn, TokenSpan, TrajectoryStatus, TrajectorySummary, TurnKind } from '@robustrl/contracts';
import { decodeNul, encodeNul } from './jsonb-nul';

/** The trajectory store's rows as the drivers hand them back, and how they become the contract's shapes. */
export interface TrajectoryRow {
  trajectory_id: string;
  job_id: string;
  batch_id: string;
  step: number;
  prompt_id: string;
  sample_index: number;
  prompt: unknown;
  owner_rollout_id: string | null;
  status: TrajectoryStatus;
  attempt: number;
  last_turn_index: number;
  min_weight_version: number | null;
  max_weight_version: number | null;
  weight_versions: number[] | string;
  /** node-pg hands DOUBLE PRECISION back as a number. */
  reward: number | string | null;
  metadata: unknown;
  created_at: Date | string;
  updated_at: Date | string;
  completed_at: Date | string | null;
}

export interface TurnRow {
  trajectory_id: string;
  turn_id: string;
  turn_index: number;
  kind: TurnKind;
  content: unknown;
  rollout_id: string | null;
  weight_version: number;
  tokens: number;
  spans: TokenSpan[] | null;
  created_at: Date | string;
}

export const TRAJECTORY_COLUMNS = `t.trajectory_id, t.job_id, t.batch_id, t.step, t.prompt_id, t.sample_index, t.prompt, t.owner_rollout_id,
  t.status, t.attempt, t.last_turn_index, t.min_weight_version, t.max_weight_version, t.weight_versions, t.reward, t.metadata,
  t.created_at, t.updated_at, t.completed_at`;
export const TURN_COLUMNS = `u.trajectory_id, u.turn_id, u.turn_index, u.kind, u.content, u.rollout_id, u.weight_version, u.tokens, u.spans, u.created_at`;

export function iso(v: Date | string): string {
  return new Date(v).toISOString();
}

export function toSummary(r: TrajectoryRow): TrajectorySummary {
  return {
    trajectoryId: r.trajectory_id,
    jobId: r.job_id,
    batchId: r.batch_id,
    step: r.step,
    promptId: r.prompt_id,
    sampleIndex: r.sample_index,
    prompt: decodeNul(r.prompt),
    ownerRolloutId: r.owner_rollout_id,
    status: r.status,
    attempt: r.attempt,
    lastTurnIndex: r.last_turn_index,
    minWeightVersion: r.min_weight_version,
    maxWeightVersion: r.max_weight_version,
    weightVersions: parseIntArray(r.weight_versions),
    reward: r.reward === null ? null : Number(r.reward),
    metadata: r.metadata === null || r.metadata === undefined ? null : decodeNul(r.metadata),
    createdAt: iso(r.created_at),
    updatedAt: iso(r.updated_at),
    completedAt: r.completed_at === null ? null : iso(r.completed_at),
  };
}

/** node-pg parses INTEGER[] to number[]; PGlite may hand back the text form '{1,2}'. */
function parseIntArray(v: number[] | string): number[] {
  if (Array.isArray(v)) return v.map(Number);
  const inner = v.replace(/^\{|\}$/g, '');
  return inner === '' ? [] : inner.split(',').map(Number);
}

/** What every trajectory event names the trajectory by. */
export function trajectoryRef(t: Pick<TrajectorySummary, 'trajectoryId' | 'batchId' | 'step' | 'promptId' | 'sampleIndex'>) {
  return { trajectoryId: t.trajectoryId, batchId: t.batchId, step: t.step, promptId: t.promptId, sampleIndex: t.sampleIndex };
}

/** A turn row as the contract's stored turn. */
export function toStoredTurn(r: TurnRow): StoredTurn {
  return {
    turnId: r.turn_id,
    turnIndex: r.turn_index,
    kind: r.kind,
    content: decodeNul(r.content),
    rolloutId: r.rollout_id,
    weightVersion: r.weight_version,
    tokens: r.tokens,
    spans: r.spans,
    createdAt: iso(r.created_at),
  };
}

/**
 * `input` (the trajectories of $1, a JSON array as `trajectoryPayload` makes it) and `ins` (those of them
 * this statement inserted): how both starting and opening trajectories begin.
 */
export const START_CTES = `input AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(
         ord int, trajectory_id text, job_id text, batch_id text, step int, prompt_id text, sample_index int, prompt jsonb, owner_rollout_id text)
     ),
     ins AS (
       INSERT INTO robustrl_trajectories (trajectory_id, job_id, batch_id, step, prompt_id, sample_index, prompt, owner_rollout_id)
       SELECT trajectory_id, job_id, batch_id, step, prompt_id, sample_index, prompt, owner_rollout_id FROM input ORDER BY ord
       ON CONFLICT DO NOTHING
       RETURNING trajectory_id
     )`;

/** START_CTES's $1: the trajectories in order, `ord` their position. */
export function trajectoryPayload(trajectories: readonly NewTrajectory[]): string {
  return JSON.stringify(
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
  );
}
