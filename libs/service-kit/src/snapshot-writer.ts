import { Logger } from '@nestjs/common';
import { PartitionPosition } from '@robustrl/bus';
import { RobustrlMessage } from '@robustrl/contracts';
import { EventStore } from '@robustrl/store';
import { InputWatermark, ReloadingError, Reloads } from './deciding-types';
import { DecisionWriter } from './decision-writer';
import { JobStates } from './job-states';
import { SNAPSHOT_INTERVAL } from './service-settings';

export { DEFAULT_SNAPSHOT_INTERVAL_MS } from './service-settings';

/** `ROBUSTRL_SNAPSHOT_INTERVAL_SECONDS` in milliseconds; a bad value stops start-up with a message naming it. */
export function snapshotIntervalFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  return Math.round(SNAPSHOT_INTERVAL.read(env) * 1000);
}

/** What a snapshot writer works with: the consumer's states, where its writes are chained, and its reload. */
export interface SnapshotWriterParts<State, Event extends RobustrlMessage = RobustrlMessage> {
  store: EventStore;
  /** The consumer's store name (its snapshot and inbox rows). */
  name: string;
  states: JobStates<State, Event>;
  writer: Pick<DecisionWriter, 'chain'>;
  reloads: Reloads;
  /** The newest input seen, written with the snapshot (a restart is blind from there). */
  input: Pick<InputWatermark, 'newestInputAt'>;
  /** Hands the positions a snapshot covers to the bus (the consumer group commits only there); absent while not subscribed. */
  acknowledge: (positions: PartitionPosition[]) => Promise<void> | undefined;
  clock: () => number;
  logger: Logger;
}

/**
 * Every `intervalMs` the states of the jobs that changed are written, with the bus positions they
 * cover, and the positions are acknowledged to the bus (docs/contributors/snapshots.md): a restart
 * loads the latest snapshot and replays at most one interval.
 */
export class SnapshotWriter<State, Event extends RobustrlMessage = RobustrlMessage> {
  /** The positions the last snapshot covered (a snapshot with nothing new is not written). */
  private lastSnapshotPositions = '';
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly parts: SnapshotWriterParts<State, Event>,
    readonly intervalMs: number,
  ) {}

  /** What the snapshot a load started from covers (nothing new since: no snapshot is written). */
  covered(positions: Record<string, string>): void {
    this.lastSnapshotPositions = JSON.stringify(positions);
  }

  /** Call `snapshot` every `intervalMs` (it logs what fails; the next one covers it). */
  startTimer(snapshot: () => Promise<void>): void {
    clearInterval(this.timer);
    this.timer = setInterval(() => void snapshot().catch((err) => this.parts.logger.error(`snapshot failed: ${String(err)}`)), this.intervalMs);
  }

  stopTimer(): void {
    clearInterval(this.timer);
  }

  /** Encode the states that changed, with the positions they cover, after every write decided before; then acknowledge the positions. */
  async snapshotNow(): Promise<void> {
    const { store, name, states, writer, reloads } = this.parts;
    if (reloads.stale) return;
    const positions = Object.fromEntries([...states.applied].map(([stream, next]) => [stream, next.toString()]));
    const changed = [...states.dirty].filter((jobId) => states.has(jobId));
    const covers = JSON.stringify(positions);
    if (changed.length === 0 && covers === this.lastSnapshotPositions) return;
    const jobs = changed.map((jobId) => ({
      jobId,
      state: JSON.stringify(states.codec.encode(states.get(jobId)!)),
      lastActiveAt: states.lastActive.get(jobId) ?? this.parts.clock(),
    }));
    states.dirty.clear();
    const newestInputAt = this.parts.input.newestInputAt;
    const run = writer.chain(async () => {
      await store.transaction(async (manager) => {
        // Every write before this one committed: the inbox's newest row is what these states include.
        const rows: Array<{ seq: string }> = await manager.query(`SELECT coalesce(max(seq), 0)::text AS seq FROM robustrl_inbox WHERE consumer = $1`, [name]);
        const inboxSeq = rows[0].seq;
        await store.snapshots.save(
          manager,
          name,
          jobs.map((j) => ({ ...j, inboxSeq })),
          { inboxSeq, positions, newestInputAt },
        );
      });
    });
    try {
      await run;
    } catch (err) {
      for (const jobId of changed) states.dirty.add(jobId);
      if (!(err instanceof ReloadingError)) reloads.begin(err);
      throw err;
    }
    this.lastSnapshotPositions = covers;
    // The group commits only here: after a crash it resumes at what this snapshot covers.
    const acknowledged: PartitionPosition[] = Object.entries(positions).map(([stream, nextOffset]) => {
      const cut = stream.lastIndexOf('/');
      return { topic: stream.slice(0, cut), partition: Number(stream.slice(cut + 1)), nextOffset };
    });
    await this.parts
      .acknowledge(acknowledged)
      ?.catch((err) => this.parts.logger.warn(`acknowledging the snapshot's positions to the bus failed (the next one covers them): ${String(err)}`));
  }
}
