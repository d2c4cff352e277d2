import { DataSource } from 'typeorm';

/**
 * The store's side of the bus's DeadLetterLedger (structurally: libs/store does not depend on libs/bus):
 * the first group to claim a record writes its dead letter, and so does that group again on its own
 * redelivery when it crashed between claiming and writing; every other group skips it, and so does the
 * claiming group once the write is marked done. See migration 0005.
 */
export class DeadLetterClaims {
  constructor(private readonly dataSource: DataSource) {}

  async claim(record: { stream: string; partition: number; offset: string }, groupId: string): Promise<boolean> {
    const rows: Array<{ consumer_group: string; written_at: Date | null }> = await this.dataSource.query(
      `WITH claimed AS (
         INSERT INTO robustrl_dead_letter_claims (stream, partition_no, record_offset, consumer_group) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING RETURNING consumer_group, written_at)
       SELECT consumer_group, written_at FROM claimed
       UNION ALL
       SELECT consumer_group, written_at FROM robustrl_dead_letter_claims WHERE stream = $1 AND partition_no = $2 AND record_offset = $3
       LIMIT 1`,
      [record.stream, record.partition, record.offset, groupId],
    );
    // Its own claim again: write it unless it was written (a replay from a snapshot meets it again).
    return rows[0]?.consumer_group === groupId && rows[0].written_at === null;
  }

  /** The claimed dead letter is written: claiming it again answers false. */
  async written(record: { stream: string; partition: number; offset: string }, groupId: string): Promise<void> {
    await this.dataSource.query(
      `UPDATE robustrl_dead_letter_claims SET written_at = now() WHERE stream = $1 AND partition_no = $2 AND record_offset = $3 AND consumer_group = $4`,
      [record.stream, record.partition, record.offset, groupId],
    );
  }
}
