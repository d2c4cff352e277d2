import { EntityManager } from 'typeorm';
import { MessageOf, MessageType, RobustrlMessage, validateMessage } from '@robustrl/contracts';

export interface LoggedMessage {
  /** Global position as a decimal string (BIGINT). */
  position: string;
  message: RobustrlMessage;
  recordedAt: Date;
}

interface LogRow {
  position: string;
  event_id: string;
  type: string;
  schema_version: number;
  kind: string;
  job_id: string;
  source: string;
  occurred_at: Date | string;
  causation_id: string | null;
  correlation_id: string;
  trace: unknown;
  data: unknown;
  recorded_at: Date | string;
}

const SELECT = `SELECT global_position::text AS position, event_id, type, schema_version, kind, job_id, source,
  occurred_at, causation_id, correlation_id, trace, data, recorded_at FROM robustrl_event_log`;

/**
 * The append-only log of every message this deployment recorded. Appends are idempotent on the
 * event id, so a redelivered message is stored once.
 */
export class EventLog {
  /**
   * Append messages (inside the caller's transaction when one is given). Returns each message's
   * global position, or null where the event id was already in the log.
   */
  async append(manager: EntityManager, messages: readonly RobustrlMessage[]): Promise<Array<string | null>> {
    if (messages.length === 0) return [];
    // One statement however many: a deciding service appends a whole batch's facts and decisions at once.
    const rows: Array<{ position: string; event_id: string }> = await manager.query(
      `INSERT INTO robustrl_event_log
         (event_id, type, schema_version, kind, job_id, source, occurred_at, causation_id, correlation_id, trace, data)
       SELECT event_id, type, schema_version, kind, job_id, source, occurred_at, causation_id, correlation_id, trace, data
         FROM unnest($1::uuid[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::timestamptz[],
                $8::text[], $9::text[], $10::jsonb[], $11::jsonb[]) WITH ORDINALITY
                  AS t(event_id, type, schema_version, kind, job_id, source, occurred_at, causation_id, correlation_id, trace, data, ord)
       ORDER BY ord
       ON CONFLICT (event_id) DO NOTHING
       RETURNING global_position::text AS position, event_id::text AS event_id`,
      [
        messages.map((m) => m.eventId),
        messages.map((m) => m.type),
        messages.map((m) => m.schemaVersion),
        messages.map((m) => m.kind),
        messages.map((m) => m.jobId),
        messages.map((m) => m.source),
        messages.map((m) => m.occurredAt),
        messages.map((m) => m.causationId),
        messages.map((m) => m.correlationId),
        messages.map((m) => (m.trace ? JSON.stringify(m.trace) : null)),
        messages.map((m) => JSON.stringify(m.data)),
      ],
    );
    const byId = new Map(rows.map((r) => [r.event_id, r.position]));
    // An id twice in one call is stored once: the first occurrence gets the position.
    const seen = new Set<string>();
    return messages.map((m) => {
      const key = m.eventId.toLowerCase();
      if (seen.has(key)) return null;
      seen.add(key);
      return byId.get(key) ?? null;
    });
  }

  /**
   * Messages after `afterPosition`, in position order, only up to the oldest transaction still
   * running, so a reader that resumes from the last position it saw never misses one.
   */
  async readAll(manager: EntityManager, afterPosition = '0', limit = 1000): Promise<LoggedMessage[]> {
    const rows: LogRow[] = await manager.query(
      `${SELECT} WHERE global_position > $1::bigint AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
       ORDER BY global_position LIMIT $2`,
      [afterPosition, limit],
    );
    return rows.map(toLogged);
  }

  async readJob(manager: EntityManager, jobId: string, afterPosition = '0', limit = 1000): Promise<LoggedMessage[]> {
    const rows: LogRow[] = await manager.query(`${SELECT} WHERE job_id = $1 AND global_position > $2::bigint ORDER BY global_position LIMIT $3`, [
      jobId,
      afterPosition,
      limit,
    ]);
    return rows.map(toLogged);
  }

  /** The job's most recently recorded message of `type`, or null when the log has none. */
  async latestOfType<T extends MessageType>(manager: EntityManager, jobId: string, type: T): Promise<MessageOf<T> | null> {
    const rows: LogRow[] = await manager.query(`${SELECT} WHERE job_id = $1 AND type = $2 ORDER BY global_position DESC LIMIT 1`, [jobId, type]);
    return rows.length === 0 ? null : (toLogged(rows[0]).message as MessageOf<T>);
  }

  async readCorrelation(manager: EntityManager, correlationId: string): Promise<LoggedMessage[]> {
    const rows: LogRow[] = await manager.query(`${SELECT} WHERE correlation_id = $1 ORDER BY global_position`, [correlationId]);
    return rows.map(toLogged);
  }
}

function toLogged(row: LogRow): LoggedMessage {
  return { position: row.position, message: messageFromRow(row, `event log position ${row.position}`), recordedAt: new Date(row.recorded_at) };
}

/** The columns of a message stored in the event log, as any query selecting them returns them. */
export type MessageRow = Omit<LogRow, 'position' | 'recorded_at'>;

/**
 * Rebuild a message from its event-log columns. The log only ever receives validated messages; a row
 * that no longer validates means a schema changed without a version bump. Fail loudly rather than
 * hand out a half-typed message.
 */
export function messageFromRow(row: MessageRow, where: string): RobustrlMessage {
  const candidate = {
    eventId: row.event_id,
    type: row.type,
    kind: row.kind,
    schemaVersion: row.schema_version,
    jobId: row.job_id,
    source: row.source,
    occurredAt: new Date(row.occurred_at).toISOString(),
    causationId: row.causation_id,
    correlationId: row.correlation_id,
    ...(row.trace ? { trace: row.trace } : {}),
    data: row.data,
  };
  const decoded = validateMessage(candidate);
  if (!decoded.ok) throw new Error(`${where} does not match its schema: ${decoded.reason}`);
  return decoded.message;
}
