import type { DataOf, MessageOf, MessageType, RobustrlMessage } from '@robustrl/contracts';

/**
 * What the emulated cluster needs from the world: a clock, timers, and a bus to talk to the control plane.
 * The simulator's kernel is one (virtual time, in-memory bus, the deciders hosted in-process); the main
 * job's live environment is the other (scaled wall-clock time, the embedded services on their real bus).
 */
export interface ClusterEnvironment {
  /** Epoch milliseconds, on the environment's clock. */
  readonly now: number;
  /** Runs `fn` after `ms` of the environment's time. */
  after(ms: number, fn: () => void): void;
  /** Hands every message of these types (null: all) of the job to `fn`. */
  subscribe(types: readonly string[] | null, fn: (message: RobustrlMessage) => void): void;
  /** Builds a message of the job at `now` and publishes it. */
  emit<T extends MessageType>(type: T, data: DataOf<T>, source: string): MessageOf<T>;
}
