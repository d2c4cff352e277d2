import { createHash, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Logger } from '@nestjs/common';
import { context, Context, ROOT_CONTEXT, Span, SpanKind, trace } from '@opentelemetry/api';
import { Delivery, DeliveryBatch, MessageBus, PartitionPosition, Subscription, toDeadLetterRecord } from '@robustrl/bus';
import { createMessage, Draft, encodeMessage, isSample, MessageType, RobustrlMessage, TopicName } from '@robustrl/contracts';
import { codecOf, Decider, JobCommand, observe, settle, StateCodec, step, Stepped, tick } from '@robustrl/domain-kit';
import { EventStore, JobSnapshot, writeDecision } from '@robustrl/store';
import { extractTraceContext, injectTraceHeaders, tracer } from '@robustrl/telemetry';
import { InputGap, InputGapMonitor } from './input-gap-monitor';
import { OutboxRelay } from './outbox-relay';
import { layoutOf, ownsPartition, PartitionShard, shardName, UNSHARDED } from './shard';

/** A span to open around tick-produced outputs, e.g. the evidence window of a verdict. */
export interface OutputSpan {
  name: string;
  startTime: number;
  attributes?: Record<string, string | number | boolean>;
}

export interface DecidingConsumerSpec<State, Event extends RobustrlMessage = RobustrlMessage, Input extends Event = Event> {
  /**
   * The `source` of everything it emits and the namespace of its output ids; also its consumer group,
   * checkpoint, inbox, snapshot and outbox name, with the shard's suffix when sharded (`shard.ts`).
   */
  consumer: string;
  /** Decide only the jobs on this shard's partitions (default: every partition, one shard). */
  shard?: PartitionShard;
  /**
   * What to do when the store holds another shard count's state and none of this one's:
   * `refuse` to start (default), or `replay` the topics from the beginning in the new layout.
   */
  shardLayoutChange?: 'refuse' | 'replay';
  topics: readonly TopicName[];
  inputTypes: readonly MessageType[];
  /**
   * One decider instance per job; outputs are drafts the host wraps into envelopes. `Input` must be
   * the types listed in `inputTypes` (the subscription delivers nothing else), and `Event` those plus
   * the decider's own outputs (the inbox holds nothing else).
   */
  decider: Decider<State, JobCommand<Input>, Event, Draft>;
  /** How often time passes for the decider (null: never, the decider reacts to messages only). */
  tickIntervalMs: number | null;
  clock?: () => number;
  /** Opens a root span for outputs of a tick (they have no inbound message to continue). */
  spanForTick?: (drafts: readonly Draft[], now: number) => OutputSpan | null;
  /**
   * Completes a draft with what only the shell can add before it is enveloped, such as a field derived
   * from a secret (the weight registry's sealed pull grants). Must depend on the draft alone, so that a
   * draft decided again becomes the same message.
   */
  completeDraft?: (draft: Draft) => Draft;
  /** Called with every message emitted, after it committed (metrics, logs). */
  onEmitted?: (messages: readonly RobustrlMessage[], jobId: string) => void;
  /** Called after each delivered input committed, with what it led to (side effects outside the store). */
  onApplied?: (input: Input, emitted: readonly RobustrlMessage[]) => void;
  /**
   * A job silent this long (by `clock`) leaves memory and the tick — a finished or abandoned job must not
   * cost every tick forever; its state comes back from its snapshot if it speaks again. null: never.
   * Default `ROBUSTRL_JOB_STATE_RETENTION_SECONDS` (`off` for never), else one hour.
   */
  idleJobRetentionMs?: number | null;
  /**
   * How often the states are snapshotted with the bus positions they cover (README "Snapshots and
   * restart"): a restart replays at most this much. Default `ROBUSTRL_SNAPSHOT_INTERVAL_SECONDS`, else 10 s.
   */
  snapshotIntervalMs?: number;
  /** Records handled in one transaction at most (default 5,000). */
  maxBatchSize?: number;
  /**
   * Time passing is evidence only while the input is whole (README "Detection knows when it is blind").
   * With this set the host watches its own input (bus health, consumer lag, its own restart) and, while
   * it has a gap, runs no tick; it records the gap as inputs of every job (`paused` when it opens,
   * `resumed` when it closes) so the decider can discount it. Absent: ticks run regardless.
   */
  inputGaps?: InputGapHandling;
}

export interface InputGapHandling {
  /** How old the newest input read may be while records wait, before the consumer counts as behind. */
  lagToleranceMs: number;
  /** How often the bus's health is sampled (default: the tick interval, else 1 s). */
  sampleIntervalMs?: number;
  /** The input recorded for a job when a gap opens (or when the job first speaks during one). */
  paused(gap: InputGap): Draft;
  /** The input recorded for a job when the gap closes at `at`. */
  resumed(gap: InputGap, at: number): Draft;
}

/** One hour: a live job reports GPU activity and throughput every few seconds, so an hour of silence is a job that is gone. */
export const DEFAULT_IDLE_JOB_RETENTION_MS = 3_600_000;
/** Ten seconds: what a restart replays at most, against one snapshot write of every busy job per interval. */
export const DEFAULT_SNAPSHOT_INTERVAL_MS = 10_000;

/** `ROBUSTRL_JOB_STATE_RETENTION_SECONDS`: seconds, or `off`; a bad value stops start-up with a message naming it. */
export function idleJobRetentionFromEnv(env: NodeJS.ProcessEnv = process.env): number | null {
  const raw = env.ROBUSTRL_JOB_STATE_RETENTION_SECONDS;
  if (raw === undefined || raw === '') return DEFAULT_IDLE_JOB_RETENTION_MS;
  if (raw === 'off') return null;
  const seconds = Number(raw);
  if (!Number.isFinite(seconds) || seconds <= 0)
    throw new Error(`ROBUSTRL_JOB_STATE_RETENTION_SECONDS must be a positive number of seconds or 'off', got '${raw}'`);
  return Math.round(seconds * 1000);
}

/** `ROBUSTRL_SNAPSHOT_INTERVAL_SECONDS`: seconds between snapshots; a bad value stops start-up with a message naming it. */
export function snapshotIntervalFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.ROBUSTRL_SNAPSHOT_INTERVAL_SECONDS;
  if (raw === undefined || raw === '') return DEFAULT_SNAPSHOT_INTERVAL_MS;
  const seconds = Number(raw);
  if (!Number.isFinite(seconds) || seconds <= 0) throw new Error(`ROBUSTRL_SNAPSHOT_INTERVAL_SECONDS must be a positive number of seconds, got '${raw}'`);
  return Math.round(seconds * 1000);
}

/** What one batch, tick or host input writes, in one transaction, after what was written before it. */
interface PendingWrite {
  /** Where the checkpoint of a bus stream moves (records up to this offset were decided). */
  checkpoint?: { stream: string; offset: string };
  /** Facts and outputs in the order they were applied: the inbox and the event log, in this order. */
  applied: RobustrlMessage[];
  /** Outputs (and host inputs): relayed to the bus after the commit. */
  outbox: RobustrlMessage[];
  /** Per job, what it emitted (for `onEmitted`). */
  emitted: Map<string, RobustrlMessage[]>;
  /** Inputs with what they led to (for `onApplied`). */
  inputs: Array<{ input: RobustrlMessage; emitted: RobustrlMessage[] }>;
}

const emptyWrite = (): PendingWrite => ({ applied: [], outbox: [], emitted: new Map(), inputs: [] });

/** The state is being reloaded from the store: the batch in hand is delivered again after the reload. */
class ReloadingError extends Error {
  constructor() {
    super('state is being reloaded from the last snapshot; the records come again');
  }
}

/** Batch writes committing while the next batches are decided (bounds memory when the store is slower than the bus). */
const MAX_WRITES_IN_FLIGHT = 4;
/** Batches handed over by the bus and not yet decided, over all partitions, before the bus is made to wait. */
const MAX_BATCHES_QUEUED = 4;

/** Attempts at deciding on one message before it is dead-lettered instead (a decider that throws on it). */
const POISON_ATTEMPTS = 3;

/**
 * The shell of a deciding service (README "Delivery guarantees", "Snapshots and restart"):
 * consume → decide → append → publish, with nothing lost and nothing done twice, at the rate of a
 * 10,000-GPU job's telemetry.
 *
 * Records come in batches (one partition's records at a time). A batch is decided in memory and
 * written in one transaction: the stream's checkpoint, the facts it applied and the outputs it
 * decided — inbox (de-duplicated by event id), event log and outbox — and the outbox is relayed after
 * the commit. Samples (`SAMPLE_TYPES`: GPU activity, throughput) are folded and decided on but
 * written nowhere; a batch of samples that decided nothing writes only its checkpoint. Writes are chained
 * in the order they were decided, so a batch of another partition is decided while the previous
 * one commits; when any write fails, the state in memory (which already holds what did not commit)
 * is dropped and reloaded — see below — and consumption starts over from the last snapshot.
 *
 * Every `snapshotIntervalMs` the states of the jobs that changed are written, with the bus positions
 * they cover, and the positions are acknowledged to the bus (the consumer group commits only there).
 * On start (and on a reload) the host loads the latest snapshot, folds the inbox rows written after it
 * (facts and decisions, in order) and resumes the bus at the snapshot's positions. Records up to the
 * stream's checkpoint were decided by the previous incarnation: their facts and outputs came back from
 * the inbox, so of those only samples are folded again (the decider's sample folding keeps the
 * newest time, so their order against the facts does not matter); records after it are decided
 * anew, with the same event ids as the first time (ids derive from the input). What a restart reads
 * is therefore bounded by the snapshot interval, never by the job's age.
 */
export class DecidingConsumer<State, Event extends RobustrlMessage = RobustrlMessage, Input extends Event = Event> {
  private states = new Map<string, State>();
  /** What readers see: the states, or while a reload builds new ones, the ones from before it. */
  private readable = this.states;
  /** When each job in memory last had a message or an output (by `clock`). */
  private readonly lastActive = new Map<string, number>();
  /** Jobs changed since their last snapshot. */
  private readonly dirty = new Set<string>();
  /** Per `topic/partition`: the first offset not folded into the states in memory. */
  private readonly applied = new Map<string, bigint>();
  /** Per `topic/partition`: the last offset a previous incarnation decided on (its checkpoint at start). */
  private readonly decidedBefore = new Map<string, bigint>();
  /** Facts applied whose write has not committed yet (event ids): a duplicate in a later batch is seen before the inbox has them. */
  private readonly appliedFacts = new Set<string>();
  /** Per job restored from a snapshot during a load: the inbox seq its snapshot already holds. */
  private readonly skipUpTo = new Map<string, bigint>();
  /** The positions the last snapshot covered (a snapshot with nothing new is not written). */
  private lastSnapshotPositions = '';
  /** Event ids whose decision threw, with how often. */
  private readonly poison = new Map<string, number>();
  private readonly idleJobRetentionMs: number | null;
  private readonly snapshotIntervalMs: number;
  private readonly codec: StateCodec<State>;
  private readonly inPlace: boolean;
  private readonly logger: Logger;
  /** The consumer group's and the store rows' name: `spec.consumer`, with the shard's suffix when sharded. */
  private readonly name: string;
  private readonly shard: PartitionShard;
  private readonly clock: () => number;
  private subscription?: Subscription;
  private timers: NodeJS.Timeout[] = [];
  private readonly outbox: OutboxRelay;
  /** Async work that must not interleave (ticks, gap samples, snapshots, evictions) runs here in turn. */
  private queue: Promise<unknown> = Promise.resolve();
  private readonly writesInFlight = new Set<Promise<void>>();
  /** Per `topic/partition`: the last batch handed over to be decided (each waits for the one before). */
  private readonly streamTails = new Map<string, Promise<void>>();
  private batchesQueued = 0;
  /** Every write, in the order decided; a failed one fails those after it. */
  private writeChain: Promise<void> = Promise.resolve();
  private reloading: Promise<void> | null = null;
  /** True from a failed write until the reloaded state consumes again: decisions and writes in between are dropped. */
  private stale = false;
  private reloadsInARow = 0;
  private stopped = false;
  /** Rows read from the store by the last start or reload: snapshots and inbox rows (tests and the restart bench read it). */
  private lastLoad = { snapshotRows: 0, inboxRows: 0 };
  /** Input gaps (when `spec.inputGaps`): the monitor, the newest input seen, and what was recorded of the gap per job. */
  private gapMonitor?: InputGapMonitor;
  private newestInputAt: number | null = null;
  private readonly pausedJobs = new Set<string>();
  private readonly resumesPending = new Map<string, { gap: InputGap; at: number }>();
  private readonly gapRecordingFailed = new Set<string>();
  private sampling = false;

  constructor(
    private readonly bus: MessageBus,
    private readonly store: EventStore,
    private readonly spec: DecidingConsumerSpec<State, Event, Input>,
  ) {
    this.shard = spec.shard ?? UNSHARDED;
    this.name = shardName(spec.consumer, this.shard);
    this.logger = new Logger(this.name);
    this.clock = spec.clock ?? Date.now;
    this.idleJobRetentionMs = spec.idleJobRetentionMs === undefined ? idleJobRetentionFromEnv() : spec.idleJobRetentionMs;
    this.snapshotIntervalMs = spec.snapshotIntervalMs ?? snapshotIntervalFromEnv();
    this.codec = codecOf(spec.decider);
    this.inPlace = spec.decider.evolution === 'in-place';
    this.outbox = new OutboxRelay(bus, store, this.name, this.logger);
  }

  async start(): Promise<void> {
    await this.checkShardLayout();
    await this.load();
    const { snapshotRows, inboxRows } = this.lastLoad;
    if (snapshotRows + inboxRows > 0)
      this.logger.log(`state loaded: ${snapshotRows} job snapshot(s) and ${inboxRows} inbox row(s) after them, ${this.states.size} job(s)`);
    await this.evictIdleJobs();
    if (this.spec.inputGaps) {
      // Blind from the newest input the last incarnation applied until this one has caught up.
      const now = this.clock();
      this.gapMonitor = new InputGapMonitor(this.spec.inputGaps.lagToleranceMs, now, this.newestInputAt ?? now);
    }
    await this.relay();
    await this.subscribe();
    if (this.spec.tickIntervalMs !== null) {
      this.every(this.spec.tickIntervalMs, () => this.serially(() => this.tick()).catch((err) => this.logger.error(`tick failed: ${String(err)}`)));
    }
    if (this.gapMonitor) {
      this.every(this.spec.inputGaps?.sampleIntervalMs ?? this.spec.tickIntervalMs ?? 1_000, () => this.sampleInput());
      void this.sampleInput();
    }
    this.every(this.snapshotIntervalMs, () => this.snapshot().catch((err) => this.logger.error(`snapshot failed: ${String(err)}`)));
    // Pending outbox entries of a failed relay are retried on a timer, not only on the next message.
    this.outbox.startRetrying();
    if (this.idleJobRetentionMs !== null) {
      const every = Math.max(1_000, Math.min(60_000, Math.floor(this.idleJobRetentionMs / 4)));
      this.every(every, () => this.evictIdleJobs().catch((err) => this.logger.error(`evicting idle jobs failed: ${String(err)}`)));
    }
    this.logger.log(`deciding on ${this.spec.inputTypes.length} message types from ${this.spec.topics.join(', ')}`);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.outbox.stopRetrying();
    await this.reloading?.catch(() => undefined);
    await this.subscription?.close();
    await this.drainQueuedBatches();
    await this.queue.catch(() => undefined);
    // A graceful stop leaves a snapshot of everything: the next start replays nothing.
    await this.snapshot().catch((err) => this.logger.warn(`final snapshot failed (the next start replays from the one before): ${String(err)}`));
    await this.relay();
  }

  /**
   * Stop as a crash (kill -9) would: no final snapshot, nothing relayed, nothing acknowledged — the next
   * start replays from the last snapshot. For tests and benches that emulate a crash in one process.
   */
  async abandon(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.outbox.stopRetrying();
    await this.reloading?.catch(() => undefined);
    await this.subscription?.close();
    await this.drainQueuedBatches();
    await this.writeChain;
  }

  /** The current state of a job (for HTTP read models and tests); during a reload, the last one before it. */
  stateOf(jobId: string): State | undefined {
    return this.readable.get(jobId);
  }

  jobs(): string[] {
    return [...this.readable.keys()];
  }

  /** What the last start (or reload) read from the store. */
  loadedRows(): { snapshotRows: number; inboxRows: number } {
    return { ...this.lastLoad };
  }

  /** Drop from memory the jobs silent longer than the retention (once their snapshot is current); returns their ids. */
  evictIdleJobs(): Promise<string[]> {
    return this.serially(async () => {
      const retention = this.idleJobRetentionMs;
      if (retention === null) return [];
      // A job changed since its snapshot is written first: it comes back from there when it speaks again.
      if ([...this.lastActive].some(([jobId, at]) => this.clock() - at > retention && this.dirty.has(jobId))) await this.snapshotNow();
      const now = this.clock();
      const idle = [...this.lastActive].filter(([jobId, at]) => now - at > retention && !this.dirty.has(jobId)).map(([jobId]) => jobId);
      for (const jobId of idle) {
        this.states.delete(jobId);
        this.lastActive.delete(jobId);
      }
      if (idle.length > 0) {
        const named = idle.length > 10 ? `${idle.slice(0, 10).join(', ')}, …` : idle.join(', ');
        this.logger.log(`evicted ${idle.length} idle job(s) from memory (silent > ${Math.round(retention / 1000)} s): ${named}`);
      }
      return idle;
    });
  }

  /** Write a snapshot now (the timer does it every `snapshotIntervalMs`; tests and a graceful stop call it). */
  snapshot(): Promise<void> {
    return this.serially(() => this.snapshotNow());
  }

  /** The gap in this consumer's input, null while it is whole or not watched. */
  inputGap(): InputGap | null {
    return this.gapMonitor?.current ?? null;
  }

  /** Sample the bus's health now and act on a gap opening or closing (the timer calls it; tests may too). */
  async sampleInput(): Promise<void> {
    if (!this.gapMonitor || this.sampling || this.stopped) return;
    this.sampling = true;
    try {
      const health = await this.bus.health().catch((err: unknown) => ({ reachable: false, error: String(err), subscriptions: [] }));
      await this.serially(() => this.onInputSample(health));
    } catch (err) {
      this.logger.error(`acting on the input's health failed: ${String(err)}`);
    } finally {
      this.sampling = false;
    }
  }

  /** Run one tick now (tests and the simulator-driven demo use it instead of waiting for the timer). */
  tickNow(): Promise<void> {
    return this.serially(() => this.tick());
  }

  /** Publish what the outbox holds, oldest first (true when nothing is left pending). */
  relay(): Promise<boolean> {
    return this.outbox.relay();
  }

  private every(ms: number, run: () => unknown): void {
    this.timers.push(setInterval(() => void run(), ms));
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async subscribe(): Promise<void> {
    this.subscription = await this.bus.subscribe({
      groupId: this.groupId,
      topics: this.spec.topics,
      types: this.spec.inputTypes,
      commit: 'acknowledged',
      maxBatchSize: this.spec.maxBatchSize ?? 5_000,
      batchHandler: (batch) => this.onBatch(batch),
      ...(this.shard.count > 1 ? { partitions: (p: number) => ownsPartition(this.shard, p) } : {}),
    });
  }

  /**
   * Another shard count than the last run's finds this layout's names empty while the other layout's
   * hold the jobs' state: started as it is, each shard would read its topics from the beginning and
   * decide their whole retention again. Refused unless the operator asked for exactly that.
   */
  private async checkShardLayout(): Promise<void> {
    const names = await this.store.checkpoints.shardNames(this.store.dataSource.manager, this.spec.consumer);
    // This layout is established once any of its shards has decided something (a shard whose partitions
    // have been quiet has no rows of its own yet, and must start like its siblings).
    if (names.some((n) => layoutOf(this.spec.consumer, n) === this.shard.count)) return;
    const others = names.filter((n) => layoutOf(this.spec.consumer, n) !== this.shard.count);
    if (others.length === 0) return;
    const change = `${this.spec.consumer} runs as ${this.shard.count} shard(s) (${this.name}), but this database holds the state of another layout (${others.join(', ')})`;
    if (this.spec.shardLayoutChange !== 'replay') {
      throw new Error(
        `${change}. A new layout starts without that state and would decide its topics' whole retention again. ` +
          `Run the previous shard count, or set ROBUSTRL_SHARD_LAYOUT_CHANGE=replay to start the new layout from the beginning of the topics (README "Sharding the detector").`,
      );
    }
    this.logger.warn(`${change}; ROBUSTRL_SHARD_LAYOUT_CHANGE=replay: consuming from the beginning of the topics`);
  }

  // ---------------------------------------------------------------------------------------------
  // Loading: the latest snapshot, then what the inbox holds after it.

  private async load(): Promise<void> {
    // Built afresh and shown to readers once complete.
    this.states = new Map();
    this.lastActive.clear();
    this.dirty.clear();
    this.applied.clear();
    this.decidedBefore.clear();
    this.appliedFacts.clear();
    this.skipUpTo.clear();
    const manager = this.store.dataSource.manager;
    const cover = await this.store.snapshots.cover(manager, this.name);
    let snapshotRows = 0;
    if (cover) {
      const since = this.idleJobRetentionMs === null ? null : this.clock() - this.idleJobRetentionMs;
      for (const snap of await this.store.snapshots.jobs(manager, this.name, since)) {
        this.adopt(snap);
        snapshotRows += 1;
      }
      for (const [stream, next] of Object.entries(cover.positions)) this.applied.set(stream, BigInt(next));
      this.newestInputAt = cover.newestInputAt;
    }
    const newest = new Map<string, number>();
    const inboxRows = await this.foldInbox(cover?.inboxSeq ?? '0', undefined, (message) => {
      const at = Date.parse(message.occurredAt);
      if (at > (newest.get(message.jobId) ?? -Infinity)) newest.set(message.jobId, at);
    });
    // A job was last active when its newest message happened, not when this process started: a job
    // finished long ago leaves memory at once instead of a retention period after every restart.
    const now = this.clock();
    for (const [jobId, at] of newest) this.lastActive.set(jobId, Math.min(now, Math.max(at, this.lastActive.get(jobId) ?? -Infinity)));
    for (const [stream, offset] of await this.store.checkpoints.readAll(manager, this.name)) this.decidedBefore.set(stream, BigInt(offset));
    this.skipUpTo.clear();
    this.readable = this.states;
    this.lastSnapshotPositions = JSON.stringify(cover?.positions ?? {});
    this.lastLoad = { snapshotRows, inboxRows };
  }

  private adopt(snap: JobSnapshot): void {
    this.states.set(snap.jobId, this.codec.decode(JSON.parse(snap.state)));
    this.lastActive.set(snap.jobId, snap.lastActiveAt);
    // Inbox rows up to the snapshot's are in it already.
    this.skipUpTo.set(snap.jobId, BigInt(snap.inboxSeq));
  }

  /**
   * Folds the inbox after `afterSeq` (all jobs, or one) into the states, in the order it was applied,
   * page by page; a job not in memory starts from its snapshot (when it has one) or from scratch.
   */
  private async foldInbox(afterSeq: string, jobId: string | undefined, seen: (message: RobustrlMessage) => void): Promise<number> {
    let after = afterSeq;
    let count = 0;
    for (;;) {
      const page = await this.store.inbox.read(this.store.dataSource.manager, this.name, after, 1000, jobId);
      for (const { seq, message } of page) {
        if (jobId === undefined && !this.states.has(message.jobId)) {
          // A job left out of the start (idle past the retention) that has rows after the snapshot: from its own snapshot.
          const snap = await this.store.snapshots.job(this.store.dataSource.manager, this.name, message.jobId);
          if (snap) this.adopt(snap);
        }
        if (this.skipUpTo.has(message.jobId) && BigInt(seq) <= this.skipUpTo.get(message.jobId)!) continue;
        this.states.set(message.jobId, this.evolve(this.stateFor(message.jobId), message));
        if (this.spec.inputTypes.includes(message.type)) this.noteInput(message);
        seen(message);
      }
      count += page.length;
      if (page.length < 1000) return count;
      after = page[page.length - 1].seq;
    }
  }

  /** A job evicted from memory comes back from its snapshot and the inbox rows after it. */
  private async ensureLoaded(jobId: string): Promise<void> {
    if (this.states.has(jobId)) return;
    const snap = await this.store.snapshots.job(this.store.dataSource.manager, this.name, jobId);
    if (snap) this.adopt(snap);
    const rows = await this.foldInbox(snap?.inboxSeq ?? '0', jobId, () => undefined);
    this.skipUpTo.delete(jobId);
    if (snap || rows > 0) this.logger.log(`job ${jobId} speaks again: state restored from ${snap ? 'its snapshot and ' : ''}${rows} inbox row(s)`);
  }

  /**
   * Something did not commit: the states in memory hold what it changed. Stop consuming, reload from
   * the store (waiting for it), and consume again from the last snapshot's positions.
   */
  private beginReload(cause: unknown): void {
    if (this.stale || this.stopped) return;
    this.stale = true;
    this.logger.warn(`a write did not commit (${String(cause)}); reloading the state from the last snapshot and consuming again from there`);
    // A reload under way (subscribing again) sees `stale` and goes round once more.
    if (this.reloading) return;
    this.reloading = (async () => {
      for (let attempt = 1; this.stale && !this.stopped; attempt++) {
        try {
          await this.subscription?.close().catch((err) => this.logger.warn(`closing the subscription for the reload: ${String(err)}`));
          this.subscription = undefined;
          await this.drainQueuedBatches();
          await this.writeChain;
          // Reloads in a row without a write committing in between back off: the cause is still there.
          if (this.reloadsInARow > 0) await sleep(Math.min(30_000, 250 * 2 ** Math.min(this.reloadsInARow, 7)));
          this.reloadsInARow += 1;
          await this.serially(() => this.load());
          this.writeChain = Promise.resolve();
          this.stale = false;
          await this.subscribe();
          this.logger.log(`reloaded: ${this.lastLoad.snapshotRows} job snapshot(s), ${this.lastLoad.inboxRows} inbox row(s); consuming again`);
        } catch (err) {
          this.stale = true;
          const waitMs = Math.min(30_000, 500 * 2 ** Math.min(attempt, 6));
          if (attempt === 1 || attempt % 10 === 0) this.logger.warn(`reload failed (attempt ${attempt}), retrying in ${waitMs} ms: ${String(err)}`);
          await sleep(waitMs);
        }
      }
    })().finally(() => {
      this.reloading = null;
    });
  }

  /** Chain a write after those decided before it; a failure (or a reload under way) fails it and starts a reload. */
  private async commit(write: PendingWrite): Promise<void> {
    const run = this.writeChain.then(async () => {
      if (this.stale) throw new ReloadingError();
      // One statement, one round trip (it is on the path of every recovery).
      const advanced = await writeDecision(this.store.dataSource.manager, {
        consumer: this.name,
        ...(write.checkpoint ? { checkpoint: { stream: write.checkpoint.stream, position: write.checkpoint.offset } } : {}),
        applied: write.applied,
        outbox: write.outbox,
      });
      if (!advanced) throw new Error(`checkpoint of ${write.checkpoint!.stream} is already past ${write.checkpoint!.offset}: another process consumes it`);
    });
    this.writeChain = run.catch(() => undefined);
    try {
      await run;
    } catch (err) {
      this.beginReload(err);
      throw err instanceof ReloadingError ? err : new Error(`write failed, state reloads: ${String(err)}`, { cause: err });
    }
    this.reloadsInARow = 0;
    // Committed: the inbox answers for these from now on (the set only covers writes in flight).
    for (const m of write.applied) this.appliedFacts.delete(m.eventId);
    this.afterCommit(write);
  }

  private afterCommit(write: PendingWrite): void {
    for (const [jobId, emitted] of write.emitted) if (emitted.length > 0) this.spec.onEmitted?.(emitted, jobId);
    if (this.spec.onApplied) for (const { input, emitted } of write.inputs) this.spec.onApplied(input as Input, emitted);
    if (write.outbox.length > 0) void this.outbox.relayCommitted(write.outbox);
  }

  // ---------------------------------------------------------------------------------------------
  // Consuming.

  /**
   * Hands the batch to its partition's queue and returns: the bus fetches the partition's next records
   * while these are decided (the bus commits nothing before a snapshot, so a batch handed back early is
   * delivered again after a crash). Each partition's batches are decided in order; a few wait at most.
   */
  private async onBatch(batch: DeliveryBatch): Promise<void> {
    const stream = `${batch.topic}/${batch.partition}`;
    const run = (this.streamTails.get(stream) ?? Promise.resolve())
      .then(() => this.decideBatch(batch))
      .catch((err) => {
        // A reload is under way: consumption starts over from the last snapshot, this batch included.
        if (err instanceof ReloadingError || this.stale) return;
        // The store did not answer (an evicted job's snapshot, the inbox), or something unforeseen: the same.
        this.beginReload(err);
      });
    this.streamTails.set(stream, run);
    this.batchesQueued += 1;
    void run.finally(() => (this.batchesQueued -= 1));
    if (this.batchesQueued > MAX_BATCHES_QUEUED) await run;
  }

  /** Until every batch handed over so far was decided (or dropped for a reload). */
  private async drainQueuedBatches(): Promise<void> {
    await Promise.all([...this.streamTails.values()]);
  }

  private async decideBatch(batch: DeliveryBatch): Promise<void> {
    if (this.stale || this.stopped) return; // consumption starts over from the last snapshot after the reload
    const stream = `${batch.topic}/${batch.partition}`;
    const from = this.applied.get(stream) ?? -1n;
    // Offsets ascend within a batch: records are compared one by one only in a batch that straddles the
    // boundary (the first after a reload), not on every record (a BigInt parsed per record is measurable at 100k/s).
    const all = batch.deliveries;
    const fresh = all.length > 0 && BigInt(all[0].offset) >= from ? all : all.filter((d) => BigInt(d.offset) >= from);
    if (fresh.length === 0) return;
    // Read is read: the input's age counts from here, not from when its batch is decided.
    if (this.gapMonitor) for (const d of fresh) this.noteInput(d.message);
    // Async preparation first (evicted jobs back in memory, what of the gap is due); then the batch is decided in one go.
    const jobIds = [...new Set(fresh.map((d) => d.message.jobId))];
    for (const jobId of jobIds) {
      await this.ensureLoaded(jobId);
      // Active from now: the idle sweep must not take it out of memory while this batch is being prepared.
      this.lastActive.set(jobId, this.clock());
    }
    const facts = fresh.filter((d) => !isSample(d.message.type)).map((d) => d.message.eventId);
    const known = await this.store.inbox.known(this.store.dataSource.manager, this.name, facts);
    if (this.gapMonitor) {
      // A job that speaks during a gap (new, or back from eviction) learns of it before its message;
      // the serial queue (ticks, snapshots) is waited for only when there is something to record.
      for (const jobId of jobIds) if (this.gapDueFor(jobId)) await this.serially(() => this.recordGapFor(jobId));
    }
    if (this.stale || this.stopped) return;

    const decidedBefore = this.decidedBefore.get(stream) ?? -1n;
    // Only the first batches after a restart hold records the previous incarnation decided.
    const replaysDecided = decidedBefore >= BigInt(fresh[0].offset);
    const now = this.clock();
    const write = emptyWrite();
    for (const delivery of fresh) {
      const message = delivery.message;
      const sample = isSample(message.type);
      if (replaysDecided && BigInt(delivery.offset) <= decidedBefore) {
        // Decided by the previous incarnation: its facts and outputs came back from the inbox.
        if (sample) this.foldSample(message);
        continue;
      }
      if (!sample && (known.has(message.eventId) || this.appliedFacts.has(message.eventId))) continue; // applied before
      const stepped = this.decideOn(delivery, now);
      if (stepped === null) continue; // dead-lettered: its decision kept throwing
      if (!sample) {
        write.applied.push(message);
        this.appliedFacts.add(message.eventId);
      }
      write.applied.push(...stepped.events);
      write.outbox.push(...stepped.events);
      if (stepped.events.length > 0) (write.emitted.get(message.jobId) ?? write.emitted.set(message.jobId, []).get(message.jobId)!).push(...stepped.events);
      write.inputs.push({ input: message, emitted: stepped.events });
      this.lastActive.set(message.jobId, now);
      this.dirty.add(message.jobId);
    }
    this.applied.set(stream, BigInt(batch.nextOffset));
    const last = BigInt(batch.nextOffset) - 1n;
    // Only folded again (decided before the restart): nothing to write.
    if (last <= decidedBefore) return;
    // Every batch moves its stream's checkpoint (one row, however many records): what was decided is
    // known after a crash, and operators see each consumer's progress in the store.
    write.checkpoint = { stream, offset: last.toString() };
    // The next batch is decided while this one commits: the bus commits nothing before a snapshot, and a
    // write that fails reloads from the last snapshot and consumes again from there, so a batch handed
    // back before its write committed is never lost. A few writes at most are in flight.
    const committing = this.commit(write).catch(() => undefined);
    this.writesInFlight.add(committing);
    void committing.finally(() => this.writesInFlight.delete(committing));
    while (this.writesInFlight.size > MAX_WRITES_IN_FLIGHT) await Promise.race(this.writesInFlight);
  }

  /** A pending resume, or a pause of the open gap not recorded yet: what `recordGapFor` would write for the job. */
  private gapDueFor(jobId: string): boolean {
    return this.resumesPending.has(jobId) || (this.gapMonitor?.current != null && !this.pausedJobs.has(jobId));
  }

  /** Fold a sample a previous incarnation already decided on (its outputs are in the state from the inbox). */
  private foldSample(message: RobustrlMessage): void {
    this.states.set(message.jobId, this.evolve(this.stateFor(message.jobId), message));
    this.dirty.add(message.jobId);
  }

  /**
   * One input through the decider (`step`); the state in memory moves on at once. A decider that
   * throws on a message leaves the job's state in doubt: reload, and after `POISON_ATTEMPTS` the
   * message is dead-lettered with the error instead of decided on (null).
   */
  private decideOn(delivery: Delivery, now: number): Stepped<State, Draft, Event> | null {
    const input = delivery.message as Input;
    const before = this.stateFor(input.jobId);
    const spans: Span[] = [];
    let parent: Context | undefined;
    // Most inputs decide nothing: the trace is continued (the producer's → `process <type>` → `decide`)
    // only for one that emits, when its first output is enveloped.
    const toEvent = (d: Draft, i: number): Event => {
      if (!parent) {
        const carrier = delivery.headers.traceparent ? delivery.headers : ((input.trace as Record<string, string> | undefined) ?? {});
        const producer = extractTraceContext(carrier);
        const processing = tracer().startSpan(
          `process ${input.type}`,
          {
            kind: SpanKind.CONSUMER,
            startTime: now,
            attributes: {
              'messaging.system': 'kafka',
              'messaging.destination.name': delivery.topic,
              'messaging.consumer.group.name': this.groupId,
              'messaging.kafka.offset': Number(delivery.offset),
              'robustrl.job_id': input.jobId,
            },
          },
          producer,
        );
        const deciding = tracer().startSpan(`decide ${this.spec.consumer}`, { kind: SpanKind.INTERNAL, startTime: now }, trace.setSpan(producer, processing));
        spans.push(deciding, processing);
        parent = trace.setSpan(trace.setSpan(producer, processing), deciding);
      }
      return context.with(parent, () => this.envelope(d, now, input, deterministicId(this.spec.consumer, input.eventId, i)));
    };
    try {
      const stepped = step(this.spec.decider, before, observe(input, now), toEvent);
      this.states.set(input.jobId, stepped.state);
      return stepped;
    } catch (err) {
      const attempts = (this.poison.get(input.eventId) ?? 0) + 1;
      this.poison.set(input.eventId, attempts);
      if (attempts < POISON_ATTEMPTS) {
        this.beginReload(new Error(`deciding on ${input.type} ${input.eventId} threw: ${String(err)}`));
        throw new ReloadingError();
      }
      this.logger.error(`deciding on ${input.type} ${input.eventId} threw ${attempts} times; dead-lettering it: ${String(err)}`);
      void this.deadLetter(delivery, err);
      if (this.inPlace) {
        // The evolve that threw may have left the job half-changed: start over from the store.
        this.beginReload(new Error(`deciding on ${input.type} ${input.eventId} threw`));
        throw new ReloadingError();
      }
      return null;
    } finally {
      for (const span of spans) span.end();
    }
  }

  private async deadLetter(delivery: Delivery, err: unknown): Promise<void> {
    const record = toDeadLetterRecord(
      {
        topic: delivery.topic,
        partition: delivery.partition,
        offset: delivery.offset,
        key: delivery.key,
        value: encodeMessage(delivery.message),
        headers: { ...delivery.headers },
      },
      { kind: 'handler-failed', reason: `deciding on it threw ${POISON_ATTEMPTS} times: ${String(err)}`, groupId: this.groupId, at: new Date(this.clock()) },
      this.bus.maxRecordBytes,
    );
    // The decision is skipped only once its dead letter is written: until then it stays in the poison count and is retried.
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        await this.bus.publishRaw(record);
        return;
      } catch (e) {
        this.logger.error(`writing the dead letter of ${delivery.message.eventId} failed (attempt ${attempt}): ${String(e)}`);
        await sleep(Math.min(5_000, 100 * 2 ** attempt));
      }
    }
  }

  private async tick(): Promise<void> {
    if (this.stopped || this.stale) return;
    if (this.gapMonitor) {
      // Missing input is not evidence: while blind, time does not pass for the deciders.
      await this.recordGap();
      if (this.gapMonitor.current !== null) return;
    }
    const now = this.clock();
    const write = emptyWrite();
    for (const [jobId, state] of this.states) {
      if (this.resumesPending.has(jobId)) continue; // its resume did not commit yet: still blind
      const drafts = this.spec.decider.decide(tick(now), state);
      if (drafts.length === 0) continue;
      const root = this.spec.spanForTick?.(drafts, now) ?? null;
      let parent: Context = ROOT_CONTEXT;
      const rootSpan = root
        ? tracer().startSpan(root.name, { kind: SpanKind.INTERNAL, startTime: root.startTime, attributes: root.attributes }, ROOT_CONTEXT)
        : null;
      if (rootSpan) parent = trace.setSpan(ROOT_CONTEXT, rootSpan);
      // Outputs of one tick are one story: they share the first one's id as correlation.
      const ids = drafts.map(() => randomUUID());
      const cause = { eventId: null, jobId, correlationId: ids[0] };
      const { state: next, events } = inSpanSync(`decide ${this.spec.consumer}`, parent, now, () =>
        settle(this.spec.decider, state, tick(now), drafts, (d, i) => this.envelope(d, now, cause, ids[i])),
      );
      rootSpan?.end(now);
      this.states.set(jobId, next);
      this.lastActive.set(jobId, now);
      this.dirty.add(jobId);
      write.applied.push(...events);
      write.outbox.push(...events);
      write.emitted.set(jobId, events);
    }
    if (write.applied.length > 0) await this.commit(write);
  }

  // ---------------------------------------------------------------------------------------------
  // Snapshots.

  /** Encode the states that changed, with the positions they cover, after every write decided before; then acknowledge the positions. */
  private async snapshotNow(): Promise<void> {
    if (this.stale) return;
    const positions = Object.fromEntries([...this.applied].map(([stream, next]) => [stream, next.toString()]));
    const changed = [...this.dirty].filter((jobId) => this.states.has(jobId));
    const covers = JSON.stringify(positions);
    if (changed.length === 0 && covers === this.lastSnapshotPositions) return;
    const jobs = changed.map((jobId) => ({
      jobId,
      state: JSON.stringify(this.codec.encode(this.states.get(jobId)!)),
      lastActiveAt: this.lastActive.get(jobId) ?? this.clock(),
    }));
    this.dirty.clear();
    const newestInputAt = this.newestInputAt;
    const run = this.writeChain.then(async () => {
      if (this.stale) throw new ReloadingError();
      await this.store.transaction(async (manager) => {
        // Every write before this one committed: the inbox's newest row is what these states include.
        const rows: Array<{ seq: string }> = await manager.query(`SELECT coalesce(max(seq), 0)::text AS seq FROM robustrl_inbox WHERE consumer = $1`, [
          this.name,
        ]);
        const inboxSeq = rows[0].seq;
        await this.store.snapshots.save(
          manager,
          this.name,
          jobs.map((j) => ({ ...j, inboxSeq })),
          { inboxSeq, positions, newestInputAt },
        );
      });
    });
    this.writeChain = run.catch(() => undefined);
    try {
      await run;
    } catch (err) {
      for (const jobId of changed) this.dirty.add(jobId);
      if (!(err instanceof ReloadingError)) this.beginReload(err);
      throw err;
    }
    this.lastSnapshotPositions = covers;
    // The group commits only here: after a crash it resumes at what this snapshot covers.
    const acknowledged: PartitionPosition[] = Object.entries(positions).map(([stream, nextOffset]) => {
      const cut = stream.lastIndexOf('/');
      return { topic: stream.slice(0, cut), partition: Number(stream.slice(cut + 1)), nextOffset };
    });
    await this.subscription
      ?.acknowledge(acknowledged)
      .catch((err) => this.logger.warn(`acknowledging the snapshot's positions to the bus failed (the next one covers them): ${String(err)}`));
  }

  // ---------------------------------------------------------------------------------------------
  // Input gaps.

  /** The newest event time among inputs (capped at now: a producer's clock running ahead must not hide a lag). */
  private noteInput(message: RobustrlMessage): void {
    const at = Math.min(Date.parse(message.occurredAt), this.clock());
    if (Number.isFinite(at) && (this.newestInputAt === null || at > this.newestInputAt)) this.newestInputAt = at;
  }

  private async onInputSample(health: Awaited<ReturnType<MessageBus['health']>>): Promise<void> {
    if (this.stopped) return;
    const monitor = this.gapMonitor!;
    const change = monitor.observe({ health, groupId: this.groupId, newestInputAt: this.newestInputAt }, this.clock());
    if (change?.kind === 'opened') {
      const { gap } = change;
      this.logger.warn(`input gap (${gap.reason}): ${gap.detail}; time-based decisions paused for ${this.states.size} job(s)`);
      this.pausedJobs.clear();
    } else if (change?.kind === 'closed') {
      const { gap, at } = change;
      this.logger.log(`input whole again after ${Math.round((at - gap.since) / 1000)} s blind (${gap.reason}); resuming ${this.states.size} job(s)`);
      for (const jobId of new Set([...this.states.keys(), ...this.pausedJobs])) {
        // A resume of an earlier gap still pending (the store was down throughout): no tick ran since its start either.
        const earlier = this.resumesPending.get(jobId)?.gap.since ?? gap.since;
        this.resumesPending.set(jobId, { gap: { ...gap, since: Math.min(earlier, gap.since) }, at });
      }
      this.pausedJobs.clear();
    }
    await this.recordGap();
  }

  /** Record what is due of the current gap for every job: resumes that did not commit yet, pauses of the open gap. */
  private async recordGap(): Promise<void> {
    for (const jobId of [...this.resumesPending.keys()]) await this.recordGapFor(jobId);
    if (this.gapMonitor?.current) for (const jobId of [...this.states.keys()]) await this.recordGapFor(jobId);
  }

  /** One job's pending resume, then its pause of the open gap; a failure (store down) is retried on the next sample or tick. */
  private async recordGapFor(jobId: string): Promise<void> {
    if (this.stale) return;
    const handling = this.spec.inputGaps!;
    try {
      const resume = this.resumesPending.get(jobId);
      if (resume) {
        await this.applyHostInput(jobId, handling.resumed(resume.gap, resume.at), `resumed/${resume.gap.since}`);
        this.resumesPending.delete(jobId);
      }
      const gap = this.gapMonitor?.current;
      if (gap && !this.pausedJobs.has(jobId)) {
        await this.applyHostInput(jobId, handling.paused(gap), `paused/${gap.since}`);
        this.pausedJobs.add(jobId);
      }
      this.gapRecordingFailed.delete(jobId);
    } catch (err) {
      // Once per job until it succeeds: with the store down this is retried every tick for every job.
      if (!this.gapRecordingFailed.has(jobId)) this.logger.warn(`recording the input gap for job ${jobId} failed, retrying: ${String(err)}`);
      this.gapRecordingFailed.add(jobId);
    }
  }

  /**
   * An input the host itself observed (not delivered by the bus), applied like a delivery: in the inbox,
   * the log and the outbox (operators see it on its topic), decided on, folded. Its id derives from the
   * job and `cause`, so recording it again after a failure applies it once.
   */
  private async applyHostInput(jobId: string, hostInput: Draft, cause: string): Promise<void> {
    const now = this.clock();
    const id = deterministicId(this.spec.consumer, `${jobId}\u0000${cause}`, 0);
    if (this.appliedFacts.has(id) || (await this.store.inbox.known(this.store.dataSource.manager, this.name, [id])).has(id)) return;
    await this.ensureLoaded(jobId);
    if (this.stale) throw new ReloadingError();
    const input = this.envelope(hostInput, now, { eventId: null, jobId, correlationId: id }, id) as Input;
    const decided = step(this.spec.decider, this.stateFor(jobId), observe(input, now), (d, i) =>
      this.envelope(d, now, input, deterministicId(this.spec.consumer, id, i)),
    );
    this.states.set(jobId, decided.state);
    this.lastActive.set(jobId, now);
    this.dirty.add(jobId);
    this.appliedFacts.add(id);
    const all = [input, ...decided.events];
    await this.commit({ applied: all, outbox: all, emitted: new Map([[jobId, all]]), inputs: [] });
  }

  // ---------------------------------------------------------------------------------------------

  /** The subscription's type filter and the inbox's contents are what make these messages `Event`s. */
  private readonly evolve = (state: State, message: RobustrlMessage): State => this.spec.decider.evolve(state, message as Event);

  private stateFor(jobId: string): State {
    return this.states.get(jobId) ?? this.spec.decider.initialState();
  }

  private get groupId(): string {
    return `robustrl-${this.name}`;
  }

  /** Outputs are `Event`s: they are part of the stream this consumer's state is a fold of. */
  private envelope(draft: Draft, now: number, cause: { eventId: string | null; jobId: string; correlationId: string }, eventId: string): Event {
    const traced = injectTraceHeaders(context.active());
    const d = this.spec.completeDraft ? this.spec.completeDraft(draft) : draft;
    return createMessage(d.type, d.data as never, {
      jobId: cause.jobId,
      source: this.spec.consumer,
      occurredAt: new Date(now).toISOString(),
      causationId: cause.eventId,
      correlationId: cause.correlationId,
      eventId,
      ...(traced ? { trace: traced } : {}),
    }) as Event;
  }
}

/** Synchronous span helper: decisions are pure and synchronous, their envelopes carry the span's context. */
function inSpanSync<T>(name: string, parent: Context, startTime: number | undefined, work: () => T): T {
  const span = tracer().startSpan(name, { kind: SpanKind.INTERNAL, ...(startTime === undefined ? {} : { startTime }) }, parent);
  try {
    return context.with(trace.setSpan(parent, span), work);
  } finally {
    span.end();
  }
}

/** The same input decided twice yields the same event ids: downstream de-duplication sees one decision. */
function deterministicId(consumer: string, causeId: string, index: number): string {
  const h = createHash('sha1').update(`${consumer}\u0000${causeId}\u0000${index}`).digest();
  h[6] = (h[6] & 0x0f) | 0x50; // version 5 (name-based, SHA-1)
  h[8] = (h[8] & 0x3f) | 0x80; // RFC 4122 variant
  const hex = h.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
