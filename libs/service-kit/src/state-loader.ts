import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@nestjs/common';
import { MessageType, RobustrlMessage } from '@robustrl/contracts';
import { EventStore, JobSnapshot } from '@robustrl/store';
import { InputWatermark, Reloads } from './deciding-types';
import { JobStates } from './job-states';
import { layoutOf, PartitionShard, shardName } from './shard';

/** What a load reads and fills. */
export interface StateLoaderParts<State, Event extends RobustrlMessage = RobustrlMessage> {
  store: EventStore;
  /** The consumer's store name (its snapshots, inbox and checkpoints). */
  name: string;
  states: JobStates<State, Event>;
  /** The consumer's input types: of the inbox rows folded, these move the newest input seen. */
  inputTypes: readonly MessageType[];
  input: InputWatermark;
  clock: () => number;
  logger: Logger;
}

/**
 * Loading a deciding consumer's states (docs/contributors/snapshots.md): the latest snapshot, then what
 * the inbox holds after it — on start, on a reload, and for one job evicted from memory that speaks again.
 */
export class StateLoader<State, Event extends RobustrlMessage = RobustrlMessage> {
  /** Per `topic/partition`: the last offset a previous incarnation decided on (its checkpoint at start). */
  readonly decidedBefore = new Map<string, bigint>();
  /** Per job restored from a snapshot during a load: the inbox seq its snapshot already holds. */
  private readonly skipUpTo = new Map<string, bigint>();
  /** Rows read from the store by the last start or reload: snapshots and inbox rows (tests and the restart bench read it). */
  private lastLoad = { snapshotRows: 0, inboxRows: 0 };

  constructor(private readonly parts: StateLoaderParts<State, Event>) {}

  /** What the last start (or reload) read from the store. */
  loadedRows(): { snapshotRows: number; inboxRows: number } {
    return { ...this.lastLoad };
  }

  /** Load the states afresh (shown to readers once complete); returns the positions the snapshot it started from covers. */
  async load(): Promise<Record<string, string>> {
    const { store, name, states } = this.parts;
    // Built afresh and shown to readers once complete.
    states.reset();
    this.decidedBefore.clear();
    this.skipUpTo.clear();
    const manager = store.dataSource.manager;
    const cover = await store.snapshots.cover(manager, name);
    let snapshotRows = 0;
    if (cover) {
      const since = states.idleJobRetentionMs === null ? null : this.parts.clock() - states.idleJobRetentionMs;
      for (const snap of await store.snapshots.jobs(manager, name, since)) {
        this.adopt(snap);
        snapshotRows += 1;
      }
      for (const [stream, next] of Object.entries(cover.positions)) states.applied.set(stream, BigInt(next));
      this.parts.input.newestInputAt = cover.newestInputAt;
    }
    const newest = new Map<string, number>();
    const inboxRows = await this.foldInbox(cover?.inboxSeq ?? '0', undefined, (message) => {
      const at = Date.parse(message.occurredAt);
      if (at > (newest.get(message.jobId) ?? -Infinity)) newest.set(message.jobId, at);
    });
    // A job was last active when its newest message happened, not when this process started: a job
    // finished long ago leaves memory at once instead of a retention period after every restart.
    const now = this.parts.clock();
    for (const [jobId, at] of newest) states.lastActive.set(jobId, Math.min(now, Math.max(at, states.lastActive.get(jobId) ?? -Infinity)));
    for (const [stream, offset] of await store.checkpoints.readAll(manager, name)) this.decidedBefore.set(stream, BigInt(offset));
    this.skipUpTo.clear();
    states.publish();
    this.lastLoad = { snapshotRows, inboxRows };
    return cover?.positions ?? {};
  }

  private adopt(snap: JobSnapshot): void {
    const { states } = this.parts;
    states.set(snap.jobId, states.codec.decode(JSON.parse(snap.state)));
    states.lastActive.set(snap.jobId, snap.lastActiveAt);
    // Inbox rows up to the snapshot's are in it already.
    this.skipUpTo.set(snap.jobId, BigInt(snap.inboxSeq));
  }

  /**
   * Folds the inbox after `afterSeq` (all jobs, or one) into the states, in the order it was applied,
   * page by page; a job not in memory starts from its snapshot (when it has one) or from scratch.
   */
  private async foldInbox(afterSeq: string, jobId: string | undefined, seen: (message: RobustrlMessage) => void): Promise<number> {
    const { store, name, states } = this.parts;
    let after = afterSeq;
    let count = 0;
    for (;;) {
      const page = await store.inbox.read(store.dataSource.manager, name, after, 1000, jobId);
      for (const { seq, message } of page) {
        if (jobId === undefined && !states.has(message.jobId)) {
          // A job left out of the start (idle past the retention) that has rows after the snapshot: from its own snapshot.
          const snap = await store.snapshots.job(store.dataSource.manager, name, message.jobId);
          if (snap) this.adopt(snap);
        }
        if (this.skipUpTo.has(message.jobId) && BigInt(seq) <= this.skipUpTo.get(message.jobId)!) continue;
        states.fold(message);
        if (this.parts.inputTypes.includes(message.type)) this.parts.input.noteInput(message);
        seen(message);
      }
      count += page.length;
      if (page.length < 1000) return count;
      after = page[page.length - 1].seq;
    }
  }

  /** A job evicted from memory comes back from its snapshot and the inbox rows after it. */
  async ensureLoaded(jobId: string): Promise<void> {
    const { store, name, states } = this.parts;
    if (states.has(jobId)) return;
    const snap = await store.snapshots.job(store.dataSource.manager, name, jobId);
    if (snap) this.adopt(snap);
    const rows = await this.foldInbox(snap?.inboxSeq ?? '0', jobId, () => undefined);
    this.skipUpTo.delete(jobId);
    if (snap || rows > 0) this.parts.logger.log(`job ${jobId} speaks again: state restored from ${snap ? 'its snapshot and ' : ''}${rows} inbox row(s)`);
  }
}

/** The steps of a reload that are the host's: stopping and starting to consume, and the load itself. */
export interface ReloadSteps {
  /** Stop consuming and wait for what is under way: the subscription closed, the batches handed over decided or dropped, the writes settled. */
  stopConsuming(): Promise<void>;
  /** Load the states from the store (in turn with the host's other serial work); writes chain afresh after it. */
  load(): Promise<void>;
  /** Consume again, from the positions the load restored. */
  consume(): Promise<void>;
}

/**
 * Something did not commit: the states in memory hold what it changed. Stop consuming, reload from
 * the store (waiting for it), and consume again from the last snapshot's positions.
 */
export class Reloader implements Reloads {
  private isStale = false;
  private reloading: Promise<void> | null = null;
  private reloadsInARow = 0;

  constructor(
    private readonly steps: ReloadSteps,
    private readonly isStopped: () => boolean,
    private readonly loadedRows: () => { snapshotRows: number; inboxRows: number },
    private readonly logger: Logger,
  ) {}

  /** True from a failed write until the reloaded state consumes again: decisions and writes in between are dropped. */
  get stale(): boolean {
    return this.isStale;
  }

  committed(): void {
    this.reloadsInARow = 0;
  }

  /** Until the reload under way (if any) is over: stop and abandon wait for it. */
  async settled(): Promise<void> {
    await this.reloading?.catch(() => undefined);
  }

  begin(cause: unknown): void {
    if (this.isStale || this.isStopped()) return;
    this.isStale = true;
    this.logger.warn(`a write did not commit (${String(cause)}); reloading the state from the last snapshot and consuming again from there`);
    // A reload under way (subscribing again) sees `stale` and goes round once more.
    if (this.reloading) return;
    this.reloading = (async () => {
      for (let attempt = 1; this.isStale && !this.isStopped(); attempt++) {
        try {
          await this.steps.stopConsuming();
          // Reloads in a row without a write committing in between back off: the cause is still there.
          if (this.reloadsInARow > 0) await sleep(Math.min(30_000, 250 * 2 ** Math.min(this.reloadsInARow, 7)));
          this.reloadsInARow += 1;
          await this.steps.load();
          this.isStale = false;
          await this.steps.consume();
          const { snapshotRows, inboxRows } = this.loadedRows();
          this.logger.log(`reloaded: ${snapshotRows} job snapshot(s), ${inboxRows} inbox row(s); consuming again`);
        } catch (err) {
          this.isStale = true;
          const waitMs = Math.min(30_000, 500 * 2 ** Math.min(attempt, 6));
          if (attempt === 1 || attempt % 10 === 0) this.logger.warn(`reload failed (attempt ${attempt}), retrying in ${waitMs} ms: ${String(err)}`);
          await sleep(waitMs);
        }
      }
    })().finally(() => {
      this.reloading = null;
    });
  }
}

/**
 * Another shard count than the last run's finds this layout's names empty while the other layout's
 * hold the jobs' state: started as it is, each shard would read its topics from the beginning and
 * decide their whole retention again. Refused unless the operator asked for exactly that (`replay`).
 */
export async function checkShardLayout(
  store: EventStore,
  consumer: string,
  shard: PartitionShard,
  shardLayoutChange: 'refuse' | 'replay' | undefined,
  logger: Logger,
): Promise<void> {
  const name = shardName(consumer, shard);
  const names = await store.checkpoints.shardNames(store.dataSource.manager, consumer);
  // This layout is established once any of its shards has decided something (a shard whose partitions
  // have been quiet has no rows of its own yet, and must start like its siblings).
  if (names.some((n) => layoutOf(consumer, n) === shard.count)) return;
  const others = names.filter((n) => layoutOf(consumer, n) !== shard.count);
  if (others.length === 0) return;
  const change = `${consumer} runs as ${shard.count} shard(s) (${name}), but this database holds the state of another layout (${others.join(', ')})`;
  if (shardLayoutChange !== 'replay') {
    throw new Error(
      `${change}. A new layout starts without that state and would decide its topics' whole retention again. ` +
        `Run the previous shard count, or set ROBUSTRL_SHARD_LAYOUT_CHANGE=replay to start the new layout from the beginning of the topics (docs/contributors/snapshots.md "Sharding the detector").`,
    );
  }
  logger.warn(`${change}; ROBUSTRL_SHARD_LAYOUT_CHANGE=replay: consuming from the beginning of the topics`);
}
