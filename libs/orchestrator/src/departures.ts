import type { Role } from '@robustrl/contracts';

/**
 * A machine the platform has announced it will take away: a drain's eviction, a scheduler's
 * preemption, a health controller's taint, an autoscaler's scale-down (docs/planned-failures.md,
 * "Notices are evidence"). The agent hears some of these itself (SIGTERM, a cloud's metadata
 * endpoint); this is what only the platform's API shows — on Kubernetes the agent runs as a DaemonSet,
 * which `kubectl drain` leaves running, so a drained worker pod's agent never gets a SIGTERM.
 */
export interface Departure {
  jobId: string;
  machineId: string;
  role: Role;
  /** What announced it, for the verdict's detail: `DisruptionTarget EvictionByEvictionAPI`, `taint karpenter.sh/disrupted:NoSchedule`. */
  reason: string;
  /** When the machine goes (ms since the epoch), as the platform says; null when it gives no deadline. */
  departsAt: number | null;
  /**
   * Derived from the cause (the pod incarnation and what announced its end), so one announcement is
   * one key however often it is read, and a new one (the same pod tainted after an eviction was
   * refused) is a new key.
   */
  key: string;
}

/**
 * The port an orchestrator adapter implements when its platform announces departures. Contract:
 * `departures()` returns every departure announced now for machines of any job in the adapter's scope
 * and not caused by the adapter itself (a machine it isolates or releases is already being acted on);
 * reading it changes nothing; a platform that cannot be read throws an `OrchestratorError`, and the
 * caller reads again later.
 */
export interface DepartureSource {
  departures(): Promise<Departure[]>;
}

/** The orchestrator's departures, when its platform has them. */
export function departureSourceOf(orchestrator: object): DepartureSource | null {
  const candidate = orchestrator as Partial<DepartureSource>;
  return typeof candidate.departures === 'function' ? (candidate as DepartureSource) : null;
}
