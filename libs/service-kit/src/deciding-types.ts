import { Draft, MessageType, RobustrlMessage, TopicName } from '@robustrl/contracts';
import { Decider, JobCommand } from '@robustrl/domain-kit';
import { InputGap } from './input-gap-monitor';
import { PartitionShard } from './shard';
import { RobustrlError } from '@robustrl/bus';

// What the parts of a deciding consumer (deciding-consumer.ts and the files it composes) share: its
// spec, the write a batch hands over, and how a part asks for a reload. Imports none of them.

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
   * How often the states are snapshotted with the bus positions they cover
   * (docs/contributors/snapshots.md): a restart replays at most this much. Default `ROBUSTRL_SNAPSHOT_INTERVAL_SECONDS`, else 10 s.
   */
  snapshotIntervalMs?: number;
  /** Records handled in one transaction at most (default 5,000). */
  maxBatchSize?: number;
  /**
   * Time passing is evidence only while the input is whole (docs/contributors/detection.md "Detection knows when it is blind").
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

/** What one batch, tick or host input writes, in one transaction, after what was written before it. */
export interface PendingWrite {
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

export const emptyWrite = (): PendingWrite => ({ applied: [], outbox: [], emitted: new Map(), inputs: [] });

/** The state is being reloaded from the store: the batch in hand is delivered again after the reload (retriable). */
export class ReloadingError extends RobustrlError {
  constructor() {
    super('state is being reloaded from the last snapshot; the records come again', { retriable: true });
  }
}

/** A deciding consumer's reload as its parts see it (state-loader.ts `Reloader`). */
export interface Reloads {
  /** True from a failed write until the reloaded state consumes again: decisions and writes in between are dropped. */
  readonly stale: boolean;
  /** Something did not commit: the states in memory hold what it changed; reload them from the store. */
  begin(cause: unknown): void;
  /** A write committed: the next reload starts without backing off. */
  committed(): void;
}

/** The newest event time among the inputs (input-gaps.ts `InputGaps`): restored by a load, moved on by what it folds. */
export interface InputWatermark {
  newestInputAt: number | null;
  noteInput(message: RobustrlMessage): void;
}
