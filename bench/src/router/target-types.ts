import type { Workload } from './workloads';

/** Whose CPU a share is: the bench sums each over the timed window and divides by the requests. */
export type ProcessRole = 'router' | 'request manager' | 'PostgreSQL' | 'Kafka broker';

/** What every target may use: the shared fake engines and the local services. */
export interface TargetContext {
  engineUrls: string[];
  kafkaBrokers: string;
  /** The bench's throw-away database (created for the run, dropped at its end). */
  databaseUrl: string;
  databaseName: string;
  /** Kafka topic prefix of this run, so its events mix with no one else's. */
  topicPrefix: string;
  jobId: string;
  /** deploy/local/router-baselines.sh's venv python and TCP_NODELAY shim, or why there are none. */
  baselines: { python: string; shim: string } | { missing: string };
  freePort(): Promise<number>;
  progress(line: string): void;
}

export interface RunningTarget {
  /** Where the load generator sends: one router, or the engines themselves. */
  urls: string[];
  /** The target's own processes, by role; pids are asked again at each reading (PostgreSQL backends come and go). */
  processes: Array<{ role: ProcessRole; pids: () => number[] }>;
  /** How it was started, as a command line a reader could run again. */
  launch: string[];
  stop(): Promise<void>;
}

export interface Target {
  /** Its name on the command line (`--targets`). */
  name: string;
  /** Its row in the tables. */
  label: string;
  /** Start it for a workload (a gateway's policy may depend on it); throws when it cannot start. */
  start(ctx: TargetContext, workload: Workload): Promise<RunningTarget>;
}

/** The router recording in the trajectory store itself (docs/router.md "Recording"): the `robustrl-on` target's setting. */
export const STORE_RECORDING_ENV = (ctx: TargetContext): Record<string, string> => ({
  ROBUSTRL_TRAJECTORY_DATABASE_URL: ctx.databaseUrl,
});
