import { EntityManager } from 'typeorm';

/** One job's decider state as a snapshot holds it. */
export interface JobSnapshot {
  jobId: string;
  /** The consumer's inbox had nothing newer for this job when it was taken. */
  inboxSeq: string;
  /** The decider codec's output, as JSON text. */
  state: string;
  lastActiveAt: number;
}

/** What a consumer's job snapshots cover on the bus, written with them. */
export interface ConsumerSnapshot {
  inboxSeq: string;
  /** Per `topic/partition`: the first offset not folded into the states. */
  positions: Record<string, string>;
  newestInputAt: number | null;
}

/** Snapshots of deciding services; see migration 0006. */
export class Snapshots {
  /** Write these jobs' states and the consumer's positions (inside the caller's transaction). */
  async save(manager: EntityManager, consumer: string, jobs: readonly JobSnapshot[], covers: ConsumerSnapshot): Promise<void> {
    if (jobs.length > 0) {
      await manager.query(
        `INSERT INTO robustrl_job_snapshots (consumer, job_id, inbox_seq, state, last_active_at)
         SELECT $1, j, s::bigint, st, to_timestamp(a / 1000.0) FROM unnest($2::text[], $3::text[], $4::text[], $5::float8[]) AS t(j, s, st, a)
         ON CONFLICT (consumer, job_id) DO UPDATE
           SET inbox_seq = EXCLUDED.inbox_seq, state = EXCLUDED.state, last_active_at = EXCLUDED.last_active_at, taken_at = now()`,
        [consumer, jobs.map((j) => j.jobId), jobs.map((j) => j.inboxSeq), jobs.map((j) => j.state), jobs.map((j) => j.lastActiveAt)],
      );
    }
    await manager.query(
      `INSERT INTO robustrl_consumer_snapshots (consumer, inbox_seq, positions, newest_input_at)
       VALUES ($1, $2::bigint, $3::jsonb, CASE WHEN $4::float8 IS NULL THEN NULL ELSE to_timestamp($4::float8 / 1000.0) END)
       ON CONFLICT (consumer) DO UPDATE
         SET inbox_seq = EXCLUDED.inbox_seq, positions = EXCLUDED.positions, newest_input_at = EXCLUDED.newest_input_at, taken_at = now()`,
      [consumer, covers.inboxSeq, JSON.stringify(covers.positions), covers.newestInputAt],
    );
  }

  /** The consumer's latest snapshot cover, or null when it never took one. */
  async cover(manager: EntityManager, consumer: string): Promise<ConsumerSnapshot | null> {
    const rows: Array<{ inbox_seq: string; positions: unknown; newest_input_at: Date | string | null }> = await manager.query(
      `SELECT inbox_seq::text AS inbox_seq, positions, newest_input_at FROM robustrl_consumer_snapshots WHERE consumer = $1`,
      [consumer],
    );
    const row = rows[0];
    if (!row) return null;
    const positions = (typeof row.positions === 'string' ? JSON.parse(row.positions) : row.positions) as Record<string, string>;
    return { inboxSeq: row.inbox_seq, positions, newestInputAt: row.newest_input_at === null ? null : new Date(row.newest_input_at).getTime() };
  }

  /** The jobs' snapshots active at or after `activeSince` (all when null). */
  async jobs(manager: EntityManager, consumer: string, activeSince: number | null): Promise<JobSnapshot[]> {
    const rows: Array<{ job_id: string; inbox_seq: string; state: string; last_active_at: Date | string }> = await manager.query(
      `SELECT job_id, inbox_seq::text AS inbox_seq, state, last_active_at FROM robustrl_job_snapshots
        WHERE consumer = $1 AND ($2::float8 IS NULL OR last_active_at >= to_timestamp($2::float8 / 1000.0))`,
      [consumer, activeSince],
    );
    return rows.map(toJobSnapshot);
  }

  /** One job's snapshot (a job evicted from memory that speaks again). */
  async job(manager: EntityManager, consumer: string, jobId: string): Promise<JobSnapshot | null> {
    const rows: Array<{ job_id: string; inbox_seq: string; state: string; last_active_at: Date | string }> = await manager.query(
      `SELECT job_id, inbox_seq::text AS inbox_seq, state, last_active_at FROM robustrl_job_snapshots WHERE consumer = $1 AND job_id = $2`,
      [consumer, jobId],
    );
    return rows[0] ? toJobSnapshot(rows[0]) : null;
  }
}

function toJobSnapshot(row: { job_id: string; inbox_seq: string; state: string; last_active_at: Date | string }): JobSnapshot {
  return { jobId: row.job_id, inboxSeq: row.inbox_seq, state: row.state, lastActiveAt: new Date(row.last_active_at).getTime() };
}
