import { EntityManager } from 'typeorm';
import { RobustrlMessage } from '@robustrl/contracts';
import { MessageRow, messageFromRow } from './event-log';
import { queryPrepared } from './prepared-query';

/** A consumer's applied messages, de-duplicated by event id; see migration 0002. */
export class Inbox {
  /**
   * Record that `consumer` applied these messages, in this order (one statement); returns, per message,
   * false when it already had it (or it came earlier in the same call).
   */
  async add(manager: EntityManager, consumer: string, messages: readonly RobustrlMessage[]): Promise<boolean[]> {
    return (await this.addInOrder(manager, consumer, messages)).added;
  }

  /** `add`, also telling the newest seq it handed out (null when every message was known). */
  async addInOrder(manager: EntityManager, consumer: string, messages: readonly RobustrlMessage[]): Promise<{ added: boolean[]; newestSeq: string | null }> {
    if (messages.length === 0) return { added: [], newestSeq: null };
    const rows: Array<{ event_id: string; seq: string }> = await manager.query(
      `INSERT INTO robustrl_inbox (consumer, event_id, job_id)
       SELECT $1, e, j FROM unnest($2::uuid[], $3::text[]) WITH ORDINALITY AS t(e, j, ord) ORDER BY ord
       ON CONFLICT DO NOTHING RETURNING event_id::text AS event_id, seq::text AS seq`,
      [consumer, messages.map((m) => m.eventId), messages.map((m) => m.jobId)],
    );
    const fresh = new Set(rows.map((r) => r.event_id));
    const added = messages.map((m) => fresh.delete(m.eventId.toLowerCase()));
    const newestSeq = rows.reduce<string | null>((max, r) => (max === null || BigInt(r.seq) > BigInt(max) ? r.seq : max), null);
    return { added, newestSeq };
  }

  /** Which of these event ids `consumer` already applied. */
  async known(manager: EntityManager, consumer: string, eventIds: readonly string[]): Promise<Set<string>> {
    if (eventIds.length === 0) return new Set();
    const rows = await queryPrepared<{ event_id: string }>(
      manager,
      'robustrl_inbox_known',
      `SELECT event_id::text AS event_id FROM robustrl_inbox WHERE consumer = $1 AND event_id = ANY($2::uuid[])`,
      [consumer, eventIds],
    );
    return new Set(rows.map((r) => r.event_id));
  }

  /** Whether `consumer` already applied the message with this event id. */
  async has(manager: EntityManager, consumer: string, eventId: string): Promise<boolean> {
    const rows: unknown[] = await manager.query(`SELECT 1 FROM robustrl_inbox WHERE consumer = $1 AND event_id = $2`, [consumer, eventId]);
    return rows.length > 0;
  }

  /**
   * The consumer's stream in the order it applied it, joined with the event log for the payloads,
   * page by page (`afterSeq` is the last seq of the previous page); with `jobId`, that job's part only.
   */
  async read(
    manager: EntityManager,
    consumer: string,
    afterSeq = '0',
    limit = 1000,
    jobId?: string,
  ): Promise<Array<{ seq: string; message: RobustrlMessage }>> {
    const rows: Array<MessageRow & { seq: string }> = await manager.query(
      `SELECT i.seq::text AS seq, l.event_id, l.type, l.schema_version, l.kind, l.job_id, l.source, l.occurred_at,
              l.causation_id, l.correlation_id, l.trace, l.data
         FROM robustrl_inbox i JOIN robustrl_event_log l ON l.event_id = i.event_id
        WHERE i.consumer = $1 AND i.seq > $2::bigint ${jobId === undefined ? '' : 'AND i.job_id = $4'} ORDER BY i.seq LIMIT $3`,
      jobId === undefined ? [consumer, afterSeq, limit] : [consumer, afterSeq, limit, jobId],
    );
    return rows.map((row) => ({ seq: row.seq, message: messageFromRow(row, `inbox of ${consumer} at seq ${row.seq}`) }));
  }
}
