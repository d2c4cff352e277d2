import { DataSource } from 'typeorm';

/**
 * The store's side of the bus's DeadLetterLedger (structurally: libs/store does not depend on libs/bus):
 * the first group to claim a record writes its dead letter, and so does that group again on its own
 * redelivery (it crashed between claiming and committing); every other group skips it. See migration 0005.
 */
export class DeadLetterClaims {
  constructor(private readonly dataSource: DataSource) {}

  async claim(record: { stream: string; partition: number; offset: string }, groupId: string): Promise<boolean> {
    const rows: Array<{ consumer_group: string }> = await this.dataSource.query(
      `WITH claimed AS (
         INSERT INTO robustrl_dead_letter_claims (stream, partition_no, record_offset, consumer_group) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING RETURNING consumer_group)
       SELECT consumer_group FROM claimed
       UNION ALL
       SELECT consumer_group FROM robustrl_dead_letter_claims WHERE stream = $1 AND partition_no = $2 AND record_offset = $3
       LIMIT 1`,
      [record.stream, record.partition, record.offset, groupId],
    );
    return rows[0]?.consumer_group === groupId;
  }
}
