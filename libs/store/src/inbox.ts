import { EntityManager } from 'typeorm';
import { RobustrlMessage } from '@robustrl/contracts';
import { MessageRow, messageFromRow } from './event-log';

/** A consumer's applied messages, de-duplicated by event id; see migration 0002. */
export class Inbox {
  /** Record that `consumer` applied these messages; returns, per message, false when it already had. */
  async add(manager: EntityManager, consumer: string, messages: readonly RobustrlMessage[]): Promise<boolean[]> {
    const added: boolean[] = [];
    for (const m of messages) {
      const rows: unknown[] = await manager.query(
        `INSERT INTO robustrl_inbox (consumer, event_id, job_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING seq`,
        [consumer, m.eventId, m.jobId],
      );
      added.push(rows.length === 1);
    }
    return added;
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
