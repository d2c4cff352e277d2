/** The settings of the infrastructure fault campaign (infra-chaos.ts) and their defaults. */
export interface InfraChaosOptions {
  trainers: number;
  rollouts: number;
  /** How long PostgreSQL is down while telemetry keeps arriving. */
  storeOutageSeconds: number;
  /** How long the broker is down. */
  brokerOutageSeconds: number;
  /** A restarted detector must consume again within this (process start → its first new input applied). */
  restartBudgetMs: number;
  progress: (line: string) => void;
}

export const DEFAULT_CHAOS_OPTIONS: Omit<InfraChaosOptions, 'progress'> = {
  trainers: 4,
  rollouts: 16,
  storeOutageSeconds: 60,
  brokerOutageSeconds: 90,
  restartBudgetMs: 5_000,
};
