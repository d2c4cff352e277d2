import { createHash, randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { context, Context, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { Delivery, MessageBus, Subscription } from '@robustrl/bus';
import { createMessage, Draft, MessageType, RobustrlMessage, TopicName } from '@robustrl/contracts';
import { Decider, JobCommand, observe, settle, step, tick } from '@robustrl/domain-kit';
import { EventStore } from '@robustrl/store';
import { injectTraceHeaders, tracer } from '@robustrl/telemetry';
import { InputGap, InputGapMonitor } from './input-gap-monitor';
import { OutboxRelay } from './outbox-relay';

/** A span to open around tick-produced outputs, e.g. the evidence window of a verdict. */
export interface OutputSpan {
  name: string;
  startTime: number;
  attributes?: Record<string, string | number | boolean>;
}

export interface DecidingConsumerSpec<State, Event extends RobustrlMessage = RobustrlMessage, Input extends Event = Event> {
  /** Consumer group, checkpoint and inbox name, and the `source` of everything it emits. */
  consumer: string;
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
  /** Called with every message emitted, after it committed (metrics, logs). */
  onEmitted?: (messages: readonly RobustrlMessage[], jobId: string) => void;
  /** Called after each delivered input committed, with what it led to (side effects outside the store). */
  onApplied?: (input: Input, emitted: readonly RobustrlMessage[]) => void;
  /**
   * A job silent this long (by `clock`) leaves memory and the tick — a finished or abandoned job must not
   * cost every tick forever; its state comes back from the inbox if it speaks again. null: never. Default
   * `ROBUSTRL_JOB_STATE_RETENTION_SECONDS` (`off` for never), else one hour.
   */
  idleJobRetentionMs?: number | null;
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

/**
 * The shell of a deciding service (README "Delivery guarantees"): consume → decide → append → publish,
 * with nothing lost and nothing done twice.
 *
 * Per delivered message, one transaction: advance the consumer checkpoint, record the message in the
 * inbox (de-duplicated by event id), decide, append input and outputs to the event log, put the
 * outputs in the inbox (they are part of the stream the state folds) and in the outbox. After the
 * commit the outbox is relayed to the bus (OutboxRelay). A crash anywhere repeats no effect: before
 * the commit nothing happened; after it, the redelivered message is a duplicate and the relay
 * publishes what is still pending (consumers de-duplicate by event id).
 *
 * On start the state of every job is rebuilt by folding the inbox — exactly what this consumer
 * applied, in the order it applied it.
 */
export class DecidingConsumer<State, Event extends RobustrlMessage = RobustrlMessage, Input extends Event = Event> {
  private readonly states = new Map<string, State>();
  /** When each job in memory last had a message or an output (by `clock`). */
  private readonly lastActive = new Map<string, number>();
  private readonly idleJobRetentionMs: number | null;
  private sweeper?: NodeJS.Timeout;
  private readonly logger: Logger;
  private readonly clock: () => number;
  private subscription?: Subscription;
  private ticker?: NodeJS.Timeout;
  private readonly outbox: OutboxRelay;
  private queue: Promise<unknown> = Promise.resolve();
  private stopped = false;
  /** Input gaps (when `spec.inputGaps`): the monitor, the newest input seen, and what was recorded of the gap per job. */
  private gapMonitor?: InputGapMonitor;
  private newestInputAt: number | null = null;
  private readonly pausedJobs = new Set<string>();
  private readonly resumesPending = new Map<string, { gap: InputGap; at: number }>();
  private readonly gapRecordingFailed = new Set<string>();
  private gapSampler?: NodeJS.Timeout;
  private sampling = false;

  constructor(
    private readonly bus: MessageBus,
    private readonly store: EventStore,
    private readonly spec: DecidingConsumerSpec<State, Event, Input>,
  ) {
    this.logger = new Logger(spec.consumer);
    this.clock = spec.clock ?? Date.now;
    this.idleJobRetentionMs = spec.idleJobRetentionMs === undefined ? idleJobRetentionFromEnv() : spec.idleJobRetentionMs;
    this.outbox = new OutboxRelay(bus, store, spec.consumer, this.logger);
  }

  async start(): Promise<void> {
    const rebuilt = await this.rebuild();
    if (rebuilt > 0) this.logger.log(`state rebuilt from ${rebuilt} inbox message(s) across ${this.states.size} job(s)`);
    await this.evictIdleJobs();
    if (this.spec.inputGaps) {
      // Blind from the newest input the last incarnation applied until this one has caught up.
      const now = this.clock();
      this.gapMonitor = new InputGapMonitor(this.spec.inputGaps.lagToleranceMs, now, this.newestInputAt ?? now);
    }
    await this.relay();
    this.subscription = await this.bus.subscribe({
      groupId: this.groupId,
      topics: this.spec.topics,
      types: this.spec.inputTypes,
      handler: (delivery) => this.serially(() => this.onDelivery(delivery)),
    });
    if (this.spec.tickIntervalMs !== null) {
      this.ticker = setInterval(
        () => void this.serially(() => this.tick()).catch((err) => this.logger.error(`tick failed: ${String(err)}`)),
        this.spec.tickIntervalMs,
      );
    }
    if (this.gapMonitor) {
      const every = this.spec.inputGaps?.sampleIntervalMs ?? this.spec.tickIntervalMs ?? 1_000;
      this.gapSampler = setInterval(() => void this.sampleInput(), every);
      void this.sampleInput();
    }
    // Pending outbox entries of a failed relay are retried on a timer, not only on the next message.
    this.outbox.startRetrying();
    if (this.idleJobRetentionMs !== null) {
      const every = Math.max(1_000, Math.min(60_000, Math.floor(this.idleJobRetentionMs / 4)));
      this.sweeper = setInterval(() => void this.evictIdleJobs().catch((err) => this.logger.error(`evicting idle jobs failed: ${String(err)}`)), every);
    }
    this.logger.log(`deciding on ${this.spec.inputTypes.length} message types from ${this.spec.topics.join(', ')}`);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.ticker);
    clearInterval(this.sweeper);
    clearInterval(this.gapSampler);
    this.outbox.stopRetrying();
    await this.subscription?.close();
    await this.queue.catch(() => undefined);
    await this.relay();
  }

  /** The current state of a job (for HTTP read models and tests). */
  stateOf(jobId: string): State | undefined {
    return this.states.get(jobId);
  }

  jobs(): string[] {
    return [...this.states.keys()];
  }

  /** Drop from memory the jobs silent longer than the retention; returns their ids. */
  evictIdleJobs(): Promise<string[]> {
    return this.serially(async () => {
      const retention = this.idleJobRetentionMs;
      if (retention === null) return [];
      const now = this.clock();
      const idle = [...this.lastActive].filter(([, at]) => now - at > retention).map(([jobId]) => jobId);
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

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async rebuild(): Promise<number> {
    const newest = new Map<string, number>();
    const count = await this.foldInbox(undefined, (message) => {
      this.states.set(message.jobId, this.evolve(this.stateFor(message.jobId), message));
      const at = Date.parse(message.occurredAt);
      if (at > (newest.get(message.jobId) ?? -Infinity)) newest.set(message.jobId, at);
      if (this.spec.inputTypes.includes(message.type)) this.noteInput(message);
    });
    // A job was last active when its newest message happened, not when this process started: a job
    // finished long ago leaves memory at once instead of a retention period after every restart.
    const now = this.clock();
    for (const jobId of this.states.keys()) this.lastActive.set(jobId, Math.min(now, newest.get(jobId) ?? now));
    return count;
  }

  /** A job's state: in memory, or — after it was evicted — folded again from its part of the inbox. */
  private async load(jobId: string): Promise<State> {
    const known = this.states.get(jobId);
    if (known !== undefined) return known;
    let state = this.spec.decider.initialState();
    const count = await this.foldInbox(jobId, (message) => (state = this.evolve(state, message)));
    if (count > 0) this.logger.log(`job ${jobId} speaks again: state restored from ${count} inbox message(s)`);
    return state;
  }

  /** Hands the inbox (all of it, or one job's part) to `apply` in the order it was applied, page by page; returns how many. */
  private async foldInbox(jobId: string | undefined, apply: (message: RobustrlMessage) => void): Promise<number> {
    let after = '0';
    let count = 0;
    for (;;) {
      const page = await this.store.inbox.read(this.store.dataSource.manager, this.spec.consumer, after, 1000, jobId);
      for (const { message } of page) apply(message);
      count += page.length;
      if (page.length < 1000) return count;
      after = page[page.length - 1].seq;
    }
  }

  /** The subscription's type filter and the inbox's contents are what make these messages `Event`s. */
  private readonly evolve = (state: State, message: RobustrlMessage): State => this.spec.decider.evolve(state, message as Event);

  private stateFor(jobId: string): State {
    return this.states.get(jobId) ?? this.spec.decider.initialState();
  }

  private async onDelivery(delivery: Delivery): Promise<void> {
    const input = delivery.message;
    if (this.gapMonitor) {
      this.noteInput(input);
      // A job that speaks during a gap (new, or back from eviction) learns of it before its message.
      await this.recordGapFor(input.jobId);
    }
    const now = this.clock();
    const before = await this.load(input.jobId);
    const stepped = await this.store.transaction(async (manager) => {
      const stream = `${delivery.topic}/${delivery.partition}`;
      if (!(await this.store.checkpoints.advance(manager, this.spec.consumer, stream, delivery.offset))) return null;
      // Our own outputs come back on the topics we consume; they are already in our inbox.
      const [fresh] = await this.store.inbox.add(manager, this.spec.consumer, [input]);
      if (!fresh) return null;
      const decided = inSpanSync(`decide ${this.spec.consumer}`, context.active(), undefined, () =>
        step(this.spec.decider, before, observe(input as Input, now), (d, i) =>
          this.envelope(d, now, input, deterministicId(this.spec.consumer, input.eventId, i)),
        ),
      );
      await this.store.log.append(manager, [input, ...decided.events]);
      await this.store.inbox.add(manager, this.spec.consumer, decided.events);
      await this.store.outbox.enqueue(manager, this.spec.consumer, decided.events);
      return decided;
    });
    if (stepped === null) return; // a duplicate: applied before
    const { state, events } = stepped;
    this.states.set(input.jobId, state);
    this.lastActive.set(input.jobId, now);
    this.afterCommit(events, input.jobId);
    this.spec.onApplied?.(input as Input, events);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    if (this.gapMonitor) {
      // Missing input is not evidence: while blind, time does not pass for the deciders.
      await this.recordGap();
      if (this.gapMonitor.current !== null) return;
    }
    const now = this.clock();
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
      await this.store.transaction(async (manager) => {
        await this.store.log.append(manager, events);
        await this.store.inbox.add(manager, this.spec.consumer, events);
        await this.store.outbox.enqueue(manager, this.spec.consumer, events);
      });
      this.states.set(jobId, next);
      this.lastActive.set(jobId, now);
      this.afterCommit(events, jobId);
    }
  }

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
    const before = await this.load(jobId);
    const id = deterministicId(this.spec.consumer, `${jobId}\u0000${cause}`, 0);
    const input = this.envelope(hostInput, now, { eventId: null, jobId, correlationId: id }, id) as Input;
    const stepped = await this.store.transaction(async (manager) => {
      const [fresh] = await this.store.inbox.add(manager, this.spec.consumer, [input]);
      if (!fresh) return null;
      const decided = step(this.spec.decider, before, observe(input, now), (d, i) => this.envelope(d, now, input, deterministicId(this.spec.consumer, id, i)));
      await this.store.log.append(manager, [input, ...decided.events]);
      await this.store.inbox.add(manager, this.spec.consumer, decided.events);
      await this.store.outbox.enqueue(manager, this.spec.consumer, [input, ...decided.events]);
      return decided;
    });
    if (stepped === null) return;
    this.states.set(jobId, stepped.state);
    this.lastActive.set(jobId, now);
    this.afterCommit([input, ...stepped.events], jobId);
  }

  private get groupId(): string {
    return `robustrl-${this.spec.consumer}`;
  }

  /** Outputs are `Event`s: they are part of the stream this consumer's state is a fold of. */
  private envelope(d: Draft, now: number, cause: { eventId: string | null; jobId: string; correlationId: string }, eventId: string): Event {
    const traced = injectTraceHeaders(context.active());
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

  private afterCommit(emitted: RobustrlMessage[], jobId: string): void {
    if (emitted.length === 0) return;
    this.spec.onEmitted?.(emitted, jobId);
    void this.relay();
  }

  /** Publish what the outbox holds, oldest first (true when nothing is left pending). */
  relay(): Promise<boolean> {
    return this.outbox.relay();
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
