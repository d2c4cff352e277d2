import { Logger } from '@nestjs/common';
import { RobustrlMessage } from '@robustrl/contracts';
import { codecOf, Decider, StateCodec } from '@robustrl/domain-kit';
import { JOB_STATE_RETENTION } from './service-settings';

export { DEFAULT_IDLE_JOB_RETENTION_MS } from './service-settings';

/** `ROBUSTRL_JOB_STATE_RETENTION_SECONDS` in milliseconds, or null (`off`); a bad value stops start-up with a message naming it. */
export function idleJobRetentionFromEnv(env: NodeJS.ProcessEnv = process.env): number | null {
  const seconds = JOB_STATE_RETENTION.read(env);
  return seconds === null ? null : Math.round(seconds * 1000);
}

/** What of its decider the states need: a fresh state, folding a message, and the snapshot codec. */
export type StateDecider<State, Event> = Pick<Decider<State, never, Event, unknown>, 'initialState' | 'evolve' | 'snapshotCodec'>;

/**
 * The jobs a deciding consumer holds in memory (docs/contributors/snapshots.md): each job's state, when
 * it last had a message or an output, which changed since their snapshot, and the bus positions the
 * states cover. A job silent longer than the retention leaves memory (`evictIdle`); it comes back from
 * its snapshot and the inbox rows after it when it speaks again (state-loader.ts `ensureLoaded`).
 */
export class JobStates<State, Event extends RobustrlMessage = RobustrlMessage> {
  private states = new Map<string, State>();
  /** What readers see: the states, or while a reload builds new ones, the ones from before it. */
  private readable = this.states;
  /** When each job in memory last had a message or an output (by `clock`). */
  readonly lastActive = new Map<string, number>();
  /** Jobs changed since their last snapshot. */
  readonly dirty = new Set<string>();
  /** Per `topic/partition`: the first offset not folded into the states in memory. */
  readonly applied = new Map<string, bigint>();
  /** How a state is written into a snapshot and read back. */
  readonly codec: StateCodec<State>;

  /**
   * @param idleJobRetentionMs how long a job stays in memory silent (null: for ever); see `DecidingConsumerSpec`.
   */
  constructor(
    private readonly decider: StateDecider<State, Event>,
    readonly idleJobRetentionMs: number | null,
    private readonly clock: () => number,
    private readonly logger: Logger,
  ) {
    this.codec = codecOf(decider);
  }

  /** Start building the states afresh (a load): readers keep seeing the ones before until `publish`. */
  reset(): void {
    this.states = new Map();
    this.lastActive.clear();
    this.dirty.clear();
    this.applied.clear();
  }

  /** Show the states built since `reset` to readers. */
  publish(): void {
    this.readable = this.states;
  }

  /** A job's state as readers see it (during a reload, the last one before it). */
  readableState(jobId: string): State | undefined {
    return this.readable.get(jobId);
  }

  readableJobs(): string[] {
    return [...this.readable.keys()];
  }

  get size(): number {
    return this.states.size;
  }

  has(jobId: string): boolean {
    return this.states.has(jobId);
  }

  get(jobId: string): State | undefined {
    return this.states.get(jobId);
  }

  set(jobId: string, state: State): void {
    this.states.set(jobId, state);
  }

  /** The jobs in memory. */
  ids(): string[] {
    return [...this.states.keys()];
  }

  entries(): IterableIterator<[string, State]> {
    return this.states.entries();
  }

  stateFor(jobId: string): State {
    return this.states.get(jobId) ?? this.decider.initialState();
  }

  /** Fold a stored or replayed message into its job's state (from a fresh one when the job is new). */
  fold(message: RobustrlMessage): void {
    this.states.set(message.jobId, this.evolve(this.stateFor(message.jobId), message));
  }

  /** The subscription's type filter and the inbox's contents are what make these messages `Event`s. */
  private readonly evolve = (state: State, message: RobustrlMessage): State => this.decider.evolve(state, message as Event);

  /**
   * Drop from memory the jobs silent longer than the retention (once their snapshot is current); returns
   * their ids. `snapshotNow` writes the changed ones first.
   */
  async evictIdle(snapshotNow: () => Promise<void>): Promise<string[]> {
    const retention = this.idleJobRetentionMs;
    if (retention === null) return [];
    // A job changed since its snapshot is written first: it comes back from there when it speaks again.
    if ([...this.lastActive].some(([jobId, at]) => this.clock() - at > retention && this.dirty.has(jobId))) await snapshotNow();
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
  }
}
