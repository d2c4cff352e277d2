import { EntityManager } from 'typeorm';
import { queryPrepared } from './prepared-query';
import { RobustrlMessage, validateMessage } from '@robustrl/contracts';

/** Messages decided but maybe not yet published; see migration 0002. */
export class Outbox {
  async enqueue(manager: EntityManager, consumer: string, messages: readonly RobustrlMessage[]): Promise<void> {
    if (messages.length === 0) return;
    await manager.query(
      `INSERT INTO robustrl_outbox (consumer, event_id, message)
       SELECT $1, e, m FROM unnest($2::uuid[], $3::jsonb[]) WITH ORDINALITY AS t(e, m, ord) ORDER BY ord
       ON CONFLICT (event_id) DO NOTHING`,
      [consumer, messages.map((m) => m.eventId), messages.map((m) => JSON.stringify(m))],
    );
  }

  /** Unpublished messages of `consumer`, oldest first. */
  async pending(manager: EntityManager, consumer: string, limit = 100): Promise<Array<{ position: string; message: RobustrlMessage }>> {
    const rows: Array<{ position: string; message: unknown }> = await manager.query(
      `SELECT position::text AS position, message FROM robustrl_outbox
        WHERE consumer = $1 AND published_at IS NULL ORDER BY position LIMIT $2`,
      [consumer, limit],
    );
    return rows.map((row) => {
      const decoded = validateMessage(typeof row.message === 'string' ? JSON.parse(row.message) : row.message);
      if (!decoded.ok) throw new Error(`outbox position ${row.position} does not match its schema: ${decoded.reason}`);
      return { position: row.position, message: decoded.message };
    });
  }

  /** Mark published by event id (a relay that published what it had just committed, without reading it back). */
  async markPublishedIds(manager: EntityManager, eventIds: readonly string[]): Promise<void> {
    if (eventIds.length === 0) return;
    await queryPrepared(
      manager,
      'robustrl_outbox_mark_published',
      `UPDATE robustrl_outbox SET published_at = now() WHERE event_id = ANY($1::uuid[]) AND published_at IS NULL`,
      [eventIds],
    );
  }

  async markPublished(manager: EntityManager, positions: readonly string[]): Promise<void> {
    if (positions.length === 0) return;
    await manager.query(`UPDATE robustrl_outbox SET published_at = now() WHERE position = ANY($1::bigint[])`, [positions]);
  }
}
