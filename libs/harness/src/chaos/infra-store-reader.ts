import { Client } from 'pg';

/**
 * The store, read for the scorecard: one short connection per query, so a PostgreSQL outage (which the
 * run causes) costs a failed query, not a broken client.
 */
export class Database {
  constructor(private readonly url: string) {}

  /** Ids of the job's messages the detector applied (its inbox). */
  async handledIds(jobId: string): Promise<Set<string>> {
    const rows = await this.query<{ event_id: string }>(`SELECT event_id FROM robustrl_inbox WHERE consumer = 'detector' AND job_id = $1`, [jobId]);
    return new Set((rows ?? []).map((r) => r.event_id));
  }

  /** When the consumer first moved a checkpoint (every batch it decides does) after `since` (ms since the epoch), or null. */
  async firstAppliedSince(consumer: string, since: Date): Promise<number | null> {
    const rows = await this.query<{ first: Date | null }>(
      `SELECT min(updated_at) AS first FROM robustrl_consumer_checkpoints WHERE consumer = $1 AND updated_at > $2`,
      [consumer, since],
    );
    return rows?.[0]?.first ? rows[0].first.getTime() : null;
  }

  private async query<R extends object>(sql: string, params: unknown[]): Promise<R[] | null> {
    const client = new Client({ connectionString: this.url, connectionTimeoutMillis: 3_000 });
    try {
      await client.connect();
      return (await client.query<R>(sql, params)).rows;
    } catch {
      return null;
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}
