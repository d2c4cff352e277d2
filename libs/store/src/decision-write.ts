import { EntityManager } from 'typeorm';
import { RobustrlMessage } from '@robustrl/contracts';
import { queryPrepared } from './prepared-query';

/** What one decided batch (or tick, or host input) of a deciding service writes. */
export interface DecisionWrite {
  consumer: string;
  /** The stream's checkpoint moves to this position (compare-and-set); absent: no checkpoint. */
  checkpoint?: { stream: string; position: string };
  /** Facts and outputs in the order applied: into the inbox and the event log. */
  applied: readonly RobustrlMessage[];
  /** Outputs to relay. */
  outbox: readonly RobustrlMessage[];
}

/**
 * A decision's whole write in one SQL statement — checkpoint, inbox, event log and outbox — so it costs
 * one round trip to the store, not one per table plus BEGIN and COMMIT: it is on the path of every
 * recovery (fault signal → verdict → command). One statement is one transaction. The checkpoint is a
 * compare-and-set as in `ConsumerCheckpoints.advance`, and the other inserts happen only when it moved
 * (or when there is none): returns false, having written nothing, when the stream was already past it.
 * Inserts are idempotent by event id, as in `Inbox`, `EventLog` and `Outbox`.
 */
export async function writeDecision(manager: EntityManager, w: DecisionWrite): Promise<boolean> {
  const a = w.applied;
  const o = w.outbox;
  const rows: Array<{ advanced: boolean }> = await queryPrepared(
    manager,
    'robustrl_write_decision',
    `WITH cp AS (
       INSERT INTO robustrl_consumer_checkpoints (consumer, stream, position)
       SELECT $1, $2, $3::bigint WHERE $2::text IS NOT NULL
       ON CONFLICT (consumer, stream) DO UPDATE SET position = EXCLUDED.position, updated_at = now()
         WHERE robustrl_consumer_checkpoints.position < EXCLUDED.position
       RETURNING 1
     ), go AS (
       SELECT ($2::text IS NULL OR EXISTS (SELECT 1 FROM cp)) AS ok
     ), ib AS (
       INSERT INTO robustrl_inbox (consumer, event_id, job_id)
       SELECT $1, e, j FROM unnest($4::uuid[], $5::text[]) WITH ORDINALITY AS t(e, j, ord), go WHERE go.ok ORDER BY ord
       ON CONFLICT DO NOTHING
       RETURNING 1
     ), lg AS (
       INSERT INTO robustrl_event_log
         (event_id, type, schema_version, kind, job_id, source, occurred_at, causation_id, correlation_id, trace, data)
       SELECT event_id, type, schema_version, kind, job_id, source, occurred_at, causation_id, correlation_id, trace, data
         FROM unnest($4::uuid[], $6::text[], $7::int[], $8::text[], $5::text[], $9::text[], $10::timestamptz[],
                     $11::text[], $12::text[], $13::jsonb[], $14::jsonb[]) WITH ORDINALITY
                AS t(event_id, type, schema_version, kind, job_id, source, occurred_at, causation_id, correlation_id, trace, data, ord), go
        WHERE go.ok ORDER BY ord
       ON CONFLICT (event_id) DO NOTHING
       RETURNING 1
     ), ob AS (
       INSERT INTO robustrl_outbox (consumer, event_id, message)
       SELECT $1, e, m FROM unnest($15::uuid[], $16::jsonb[]) WITH ORDINALITY AS t(e, m, ord), go WHERE go.ok ORDER BY ord
       ON CONFLICT (event_id) DO NOTHING
       RETURNING 1
     )
     SELECT go.ok AS advanced, (SELECT count(*) FROM ib) + (SELECT count(*) FROM lg) + (SELECT count(*) FROM ob) AS written FROM go`,
    [
      w.consumer,
      w.checkpoint?.stream ?? null,
      w.checkpoint?.position ?? null,
      a.map((m) => m.eventId),
      a.map((m) => m.jobId),
      a.map((m) => m.type),
      a.map((m) => m.schemaVersion),
      a.map((m) => m.kind),
      a.map((m) => m.source),
      a.map((m) => m.occurredAt),
      a.map((m) => m.causationId),
      a.map((m) => m.correlationId),
      a.map((m) => (m.trace ? JSON.stringify(m.trace) : null)),
      a.map((m) => JSON.stringify(m.data)),
      o.map((m) => m.eventId),
      o.map((m) => JSON.stringify(m)),
    ],
  );
  return rows[0]?.advanced === true;
}
