/** The settings, results and constants of the recovery-latency run (recovery-latency.ts): the leaf its files share. */
/** The run's settings (see recovery-latency.bench.ts for what each changes). */
export interface RecoveryLatencyOptions {
  /** Explicit fault signals measured (one round trip each as the baseline, interleaved). */
  faults: number;
  /** Faults per job: the rollout machines a job has for them (plus one for its warm-up fault). */
  faultsPerJob: number;
  /** Trainer machines per job (they keep reporting; no fault is signalled on them). */
  trainersPerJob: number;
  /** Pause after each measured round trip and each fault, plus up to as much again at random. */
  gapMs: number;
  /** How often each job's machines report (GPU activity, rollout throughput); 0: they do not (a quiet control plane). */
  telemetryMs: number;
  progress: (line: string) => void;
}

/** One fault: publish → the controller's command consumed, and where the time went (ms). */
export interface FaultSample {
  jobId: string;
  machineId: string;
  /** The controller's first command for it (RestartRolloutEngine for a rollout's exited engine, see ROLLOUT_ANSWERS). */
  command: string;
  /** The bench's publish call → the command consumed by the bench (performance.now()). */
  totalMs: number;
  /** Publish → the detector began handling the signal (FaultConfirmed.occurredAt, the detector's clock = ours). */
  toDetectorMs: number | null;
  /** Detector began handling → its FaultConfirmed consumed by the bench (the detector's commit and relay, one hop). */
  detectorToVerdictMs: number | null;
  /** Detector began handling → the controller began handling the verdict (the command's occurredAt). */
  detectorToControllerMs: number | null;
  /** Controller began handling → its RecoveryDecided (published with the command) consumed by the bench. */
  controllerToDecisionMs: number | null;
  /** Controller began handling → the command consumed by the bench. */
  controllerToConsumedMs: number | null;
}

export interface RecoveryLatencyResult {
  /** Bare kafkajs produce → consume round trips (ms). */
  baselineMs: number[];
  /** Bare produce → relay process → relay process → consume (ms): the path's three crossings with nothing decided. */
  chainMs: number[];
  /** Bare produce → one relay process → consume (ms): two crossings, one process, nothing decided (the goal's two round trips). */
  relayMs: number[];
  /** As `relayMs` with the relay committing a row to PostgreSQL before producing (the floor of one crash-safe deciding hop). */
  durableRelayMs: number[];
  /** Rows the durable relay committed (one per record it relayed, warm-ups included): proof that it wrote. */
  durableRelayRows: number;
  samples: FaultSample[];
  /** Faults whose command did not arrive within the timeout. */
  missed: Array<{ jobId: string; machineId: string }>;
  jobs: number;
  partitions: number;
}

/**
 * The controller's answers to a rollout's exited engine that leave the job running: the engine restarted
 * in place while the machine has restarts left in its budget (every fault here hits a machine
 * once), else the machine replaced. A RestartTask instead means the controller had not read the job's step.
 */
export const ROLLOUT_ANSWERS: ReadonlySet<string> = new Set(['RestartRolloutEngine', 'ReplaceMachine']);
/** A fault whose command has not come after this long is counted as missed. */
export const COMMAND_TIMEOUT_MS = 30_000;
export const BASELINE_WARMUP = 10;
