/** How the Kafka adapter restarts a consumer that kafkajs stopped for good. */
export interface ConsumerRestartPolicy {
  /** Delay before the first restart; it doubles with every crash in a row. */
  initialDelayMs: number;
  maxDelayMs: number;
  /** A consumer that stayed in its group this long before crashing starts the backoff over. */
  stableAfterMs: number;
}

/**
 * A second, doubling to half a minute: a consumer that crashes on a passing condition (a broker restarting,
 * an incompatible member that leaves) is back within seconds, and one that crashes on every start (a
 * misconfiguration) costs the broker a join every 30 s rather than a tight loop.
 */
export const DEFAULT_CONSUMER_RESTART: ConsumerRestartPolicy = { initialDelayMs: 1_000, maxDelayMs: 30_000, stableAfterMs: 60_000 };

/** Delay before the restart after the n-th crash in a row (n ≥ 1). */
export function restartDelayMs(consecutiveCrashes: number, policy: ConsumerRestartPolicy): number {
  const n = Math.max(1, consecutiveCrashes);
  return Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.min(n - 1, 30));
}
