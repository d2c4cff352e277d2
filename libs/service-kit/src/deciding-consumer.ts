import { Logger } from '@nestjs/common';
import { MessageBus, PartitionPosition, Subscription } from '@robustrl/bus';
import { Draft, RobustrlMessage } from '@robustrl/contracts';
import { EventStore } from '@robustrl/store';
import { BatchDecider } from './batch-decider';
import { BatchQueue } from './batch-queue';
import { DecidingConsumerSpec, emptyWrite, ReloadingError } from './deciding-types';
import { DecisionSteps } from './decision-steps';
import { DecisionWriter } from './decision-writer';
import { InputGap } from './input-gap-monitor';
import { InputGaps } from './input-gaps';
import { idleJobRetentionFromEnv, JobStates } from './job-states';
import { PoisonMessages } from './poison-messages';
import { ownsPartition, PartitionShard, shardName, UNSHARDED } from './shard';
import { snapshotIntervalFromEnv, SnapshotWriter } from './snapshot-writer';
import { checkShardLayout, Reloader, StateLoader } from './state-loader';

export type { DecidingConsumerSpec, InputGapHandling, OutputSpan } from './deciding-types';
export { DEFAULT_IDLE_JOB_RETENTION_MS, idleJobRetentionFromEnv } from './job-states';
export { DEFAULT_SNAPSHOT_INTERVAL_MS, snapshotIntervalFromEnv } from './snapshot-writer';

/**
 * The shell of a deciding service (docs/contributors/delivery-guarantees.md, docs/contributors/snapshots.md):
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
 *
 * The host composes its parts and runs them: the jobs in memory and their eviction (`job-states.ts`),
 * loading and reloading them (`state-loader.ts`), each partition's batches in turn (`batch-queue.ts`)
 * decided in one go (`batch-decider.ts`) through the decider's steps (`decision-steps.ts`), messages
 * it throws on (`poison-messages.ts`), the writes and the outbox (`decision-writer.ts`), the snapshots
 * (`snapshot-writer.ts`) and the input's gaps (`input-gaps.ts`); the shared types are in
 * `deciding-types.ts`. The host itself starts and stops, subscribes, and ticks.
 */
export class DecidingConsumer<State, Event extends RobustrlMessage = RobustrlMessage, Input extends Event = Event> {
  private readonly states: JobStates<State, Event>;
  private readonly loader: StateLoader<State, Event>;
  private readonly reloader: Reloader;
  private readonly writer: DecisionWriter<Input>;
  private readonly snapshots: SnapshotWriter<State, Event>;
  private readonly gaps: InputGaps;
  private readonly steps: DecisionSteps<State, Event, Input>;
  private readonly batches: BatchQueue;
  private readonly logger: Logger;
  /** The consumer group's and the store rows' name: `spec.consumer`, with the shard's suffix when sharded. */
  private readonly name: string;
  private readonly shard: PartitionShard;
  private readonly clock: () => number;
  private subscription?: Subscription;
  private timers: NodeJS.Timeout[] = [];
  /** Async work that must not interleave (ticks, gap samples, snapshots, evictions) runs here in turn. */
  private queue: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly bus: MessageBus,
    private readonly store: EventStore,
    private readonly spec: DecidingConsumerSpec<State, Event, Input>,
  ) {
    this.shard = spec.shard ?? UNSHARDED;
    this.name = shardName(spec.consumer, this.shard);
    this.logger = new Logger(this.name);
    this.clock = spec.clock ?? Date.now;
    const idleJobRetentionMs = spec.idleJobRetentionMs === undefined ? idleJobRetentionFromEnv() : spec.idleJobRetentionMs;
    const snapshotIntervalMs = spec.snapshotIntervalMs ?? snapshotIntervalFromEnv();
    this.steps = new DecisionSteps(spec, this.groupId);
    const { name, clock, logger } = this;
    const isStopped = () => this.stopped;
    this.states = new JobStates(spec.decider, idleJobRetentionMs, clock, logger);
    this.reloader = new Reloader(
      {
        stopConsuming: async () => {
          await this.subscription?.close().catch((err) => this.logger.warn(`closing the subscription for the reload: ${String(err)}`));
          this.subscription = undefined;
          await this.batches.drain();
          await this.writer.settled();
        },
        load: async () => {
          await this.serially(() => this.load());
          this.writer.resetChain();
        },
        consume: () => this.subscribe(),
      },
      isStopped,
      () => this.loader.loadedRows(),
      logger,
    );
    const reloads = this.reloader;
    this.writer = new DecisionWriter<Input>(bus, store, name, reloads, spec, logger);
    this.gaps = new InputGaps({
      handling: spec.inputGaps,
      bus,
      groupId: this.groupId,
      jobs: this.states,
      reloads,
      isStopped,
      record: (jobId, input, cause) => this.applyHostInput(jobId, input, cause),
      inTurn: (work) => this.serially(work),
      clock,
      logger,
    });
    this.loader = new StateLoader({ store, name, states: this.states, inputTypes: spec.inputTypes, input: this.gaps, clock, logger });
    const decider = new BatchDecider<State, Event, Input>({
      states: this.states,
      loader: this.loader,
      writer: this.writer,
      gaps: this.gaps,
      steps: this.steps,
      poison: new PoisonMessages({ bus, groupId: this.groupId, reloads, inPlace: spec.decider.evolution === 'in-place', isStopped, clock, logger }),
      reloads,
      known: (facts) => store.inbox.known(store.dataSource.manager, name, facts),
      inTurn: (work) => this.serially(work),
      isStopped,
      clock,
    });
    this.batches = new BatchQueue((batch) => decider.decide(batch), reloads);
    const acknowledge = (positions: PartitionPosition[]) => this.subscription?.acknowledge(positions);
    this.snapshots = new SnapshotWriter(
      { store, name, states: this.states, writer: this.writer, reloads, input: this.gaps, acknowledge, clock, logger },
      snapshotIntervalMs,
    );
  }

  async start(): Promise<void> {
    await checkShardLayout(this.store, this.spec.consumer, this.shard, this.spec.shardLayoutChange, this.logger);
    await this.load();
    const { snapshotRows, inboxRows } = this.loader.loadedRows();
    if (snapshotRows + inboxRows > 0)
      this.logger.log(`state loaded: ${snapshotRows} job snapshot(s) and ${inboxRows} inbox row(s) after them, ${this.states.size} job(s)`);
    await this.evictIdleJobs();
    // Blind from the newest input the last incarnation applied until this one has caught up.
    this.gaps.watch();
    await this.relay();
    await this.subscribe();
    if (this.spec.tickIntervalMs !== null) {
      this.every(this.spec.tickIntervalMs, () => this.serially(() => this.tick()).catch((err) => this.logger.error(`tick failed: ${String(err)}`)));
    }
    if (this.gaps.watched) {
      this.every(this.spec.inputGaps?.sampleIntervalMs ?? this.spec.tickIntervalMs ?? 1_000, () => this.sampleInput());
      void this.sampleInput();
    }
    this.snapshots.startTimer(() => this.snapshot());
    // Pending outbox entries of a failed relay are retried on a timer, not only on the next message.
    this.writer.startRetrying();
    const retention = this.states.idleJobRetentionMs;
    if (retention !== null) {
      const every = Math.max(1_000, Math.min(60_000, Math.floor(retention / 4)));
      this.every(every, () => this.evictIdleJobs().catch((err) => this.logger.error(`evicting idle jobs failed: ${String(err)}`)));
    }
    this.logger.log(`deciding on ${this.spec.inputTypes.length} message types from ${this.spec.topics.join(', ')}`);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.stopTimers();
    await this.reloader.settled();
    await this.subscription?.close();
    await this.batches.drain();
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
    this.stopTimers();
    await this.reloader.settled();
    await this.subscription?.close();
    await this.batches.drain();
    await this.writer.settled();
  }

  /** The current state of a job (for HTTP read models and tests); during a reload, the last one before it. */
  stateOf(jobId: string): State | undefined {
    return this.states.readableState(jobId);
  }

  jobs(): string[] {
    return this.states.readableJobs();
  }

  /** What the last start (or reload) read from the store. */
  loadedRows(): { snapshotRows: number; inboxRows: number } {
    return this.loader.loadedRows();
  }

  /** Drop from memory the jobs silent longer than the retention (once their snapshot is current); returns their ids. */
  evictIdleJobs(): Promise<string[]> {
    return this.serially(() => this.states.evictIdle(() => this.snapshots.snapshotNow()));
  }

  /** Write a snapshot now (the timer does it every `snapshotIntervalMs`; tests and a graceful stop call it). */
  snapshot(): Promise<void> {
    return this.serially(() => this.snapshots.snapshotNow());
  }

  /** The gap in this consumer's input, null while it is whole or not watched. */
  inputGap(): InputGap | null {
    return this.gaps.current;
  }

  /** Sample the bus's health now and act on a gap opening or closing (the timer calls it; tests may too). */
  sampleInput(): Promise<void> {
    return this.gaps.sample();
  }

  /** Run one tick now (tests and the simulator-driven demo use it instead of waiting for the timer). */
  tickNow(): Promise<void> {
    return this.serially(() => this.tick());
  }

  /** Publish what the outbox holds, oldest first (true when nothing is left pending). */
  relay(): Promise<boolean> {
    return this.writer.relay();
  }

  private every(ms: number, run: () => unknown): void {
    this.timers.push(setInterval(() => void run(), ms));
  }

  private stopTimers(): void {
    for (const t of this.timers) clearInterval(t);
    this.snapshots.stopTimer();
    this.writer.stopRetrying();
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Load the states from the store (state-loader.ts); facts whose writes never committed go with the states they were in. */
  private async load(): Promise<void> {
    this.writer.appliedFacts.clear();
    this.snapshots.covered(await this.loader.load());
  }

  private async subscribe(): Promise<void> {
    this.subscription = await this.bus.subscribe({
      groupId: this.groupId,
      topics: this.spec.topics,
      types: this.spec.inputTypes,
      commit: 'acknowledged',
      maxBatchSize: this.spec.maxBatchSize ?? 5_000,
      batchHandler: (batch) => this.batches.hand(batch),
      ...(this.shard.count > 1 ? { partitions: (p: number) => ownsPartition(this.shard, p) } : {}),
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Deciding without a delivery: time passing, and inputs the host observed itself.

  private async tick(): Promise<void> {
    if (this.stopped || this.reloader.stale) return;
    if (this.gaps.watched) {
      // Missing input is not evidence: while blind, time does not pass for the deciders.
      await this.gaps.recordGap();
      if (this.gaps.current !== null) return;
    }
    const now = this.clock();
    const write = emptyWrite();
    for (const [jobId, state] of this.states.entries()) {
      if (this.gaps.resumePending(jobId)) continue; // its resume did not commit yet: still blind
      const stepped = this.steps.onTick(jobId, state, now);
      if (stepped === null) continue;
      const { state: next, events } = stepped;
      this.states.set(jobId, next);
      this.states.lastActive.set(jobId, now);
      this.states.dirty.add(jobId);
      write.applied.push(...events);
      write.outbox.push(...events);
      write.emitted.set(jobId, events);
    }
    if (write.applied.length > 0) await this.writer.commit(write);
  }

  /**
   * An input the host itself observed (not delivered by the bus), applied like a delivery: in the inbox,
   * the log and the outbox (operators see it on its topic), decided on, folded. Its id derives from the
   * job and `cause`, so recording it again after a failure applies it once.
   */
  private async applyHostInput(jobId: string, hostInput: Draft, cause: string): Promise<void> {
    const now = this.clock();
    const id = this.steps.hostInputId(jobId, cause);
    if (this.writer.appliedFacts.has(id) || (await this.store.inbox.known(this.store.dataSource.manager, this.name, [id])).has(id)) return;
    await this.loader.ensureLoaded(jobId);
    if (this.reloader.stale) throw new ReloadingError();
    const { input, stepped: decided } = this.steps.onHostInput(jobId, hostInput, id, this.states.stateFor(jobId), now);
    this.states.set(jobId, decided.state);
    this.states.lastActive.set(jobId, now);
    this.states.dirty.add(jobId);
    this.writer.appliedFacts.add(id);
    const all = [input, ...decided.events];
    await this.writer.commit({ applied: all, outbox: all, emitted: new Map([[jobId, all]]), inputs: [] });
  }

  private get groupId(): string {
    return `robustrl-${this.name}`;
  }
}
