import { EntityManager } from 'typeorm';

export type ApplyOutcome = 'applied' | 'duplicate';

/**
 * Consumer checkpoints, advanced compare-and-set in the same transaction as the consumer's effect:
 * either both the effect and the new position commit, or neither does. A redelivered message (same
 * or older position) finds the checkpoint already past it and its effect is skipped.
 *
 * A `stream` is whatever sequence the consumer reads in order: a Kafka topic-partition
 * (`robustrl.verdicts/2`, position = offset) or the event log (`$all`, position = global position).
 */
export class ConsumerCheckpoints {
  /**
   * Advance `consumer`'s checkpoint on `stream` to `position` if it is behind it. True when this
   * call advanced it (the caller owns the effect), false when the position was already reached.
   * The upsert locks the row, so two concurrent deliveries of one position cannot both win.
   */
  async advance(manager: EntityManager, consumer: string, stream: string, position: string): Promise<boolean> {
    const rows: unknown[] = await manager.query(
      `INSERT INTO robustrl_consumer_checkpoints (consumer, stream, position) VALUES ($1, $2, $3::bigint)
       ON CONFLICT (consumer, stream) DO UPDATE SET position = EXCLUDED.position, updated_at = now()
         WHERE robustrl_consumer_checkpoints.position < EXCLUDED.position
       RETURNING position`,
      [consumer, stream, position],
    );
    return rows.length === 1;
  }

  /** The last position applied, or null when the consumer never applied anything on that stream. */
  async read(manager: EntityManager, consumer: string, stream: string): Promise<string | null> {
    const rows: Array<{ position: string }> = await manager.query(
      `SELECT position::text AS position FROM robustrl_consumer_checkpoints WHERE consumer = $1 AND stream = $2`,
      [consumer, stream],
    );
    return rows[0]?.position ?? null;
  }

  /**
   * The names with checkpoints that are `consumer` or one of its shards (`<consumer>.shard-…`): the
   * layouts a sharded service was run with on this database.
   */
  async shardNames(manager: EntityManager, consumer: string): Promise<string[]> {
    const rows: Array<{ consumer: string }> = await manager.query(
      `SELECT DISTINCT consumer FROM robustrl_consumer_checkpoints WHERE consumer = $1 OR starts_with(consumer, $1 || '.shard-') ORDER BY consumer`,
      [consumer],
    );
    return rows.map((r) => r.consumer);
  }

  /** Every stream's last position applied by `consumer`. */
  async readAll(manager: EntityManager, consumer: string): Promise<Map<string, string>> {
    const rows: Array<{ stream: string; position: string }> = await manager.query(
      `SELECT stream, position::text AS position FROM robustrl_consumer_checkpoints WHERE consumer = $1`,
      [consumer],
    );
    return new Map(rows.map((r) => [r.stream, r.position]));
  }
}
