/**
 * When a rollout machine may take work (a new rollout served before it held weights). Pure.
 *
 * A machine that takes part in weight transfer (it registered a weight server) is known to hold a
 * version once it relays it whole (`RelayJoined`). One that does not (no UCX there) gets its weights
 * some other way the control plane cannot see: its own word that it serves is all there is.
 * Before the trainer published any version, every engine serves the weights it started from.
 */
export interface WeightHolding {
  /** Whether the machine takes part in weight transfer, so its holdings are known. */
  readonly weightsTracked: boolean;
  /** The newest version it holds whole, null before its first. */
  readonly weightVersion: number | null;
}

/** The pool's rule for moving trajectories to a machine: it holds weights at all (a fresh machine does not). */
export function holdsWeights(machine: WeightHolding, publishedVersion: number | null): boolean {
  return !machine.weightsTracked || publishedVersion === null || machine.weightVersion !== null;
}

/**
 * The router's rule for routing to a machine's engine: it holds a version at most `maxStaleness`
 * behind the newest published one. A fresh machine is STALE until it pulled one (like a re-admitted
 * engine that must first complete a weight update); one that falls further behind leaves until it
 * catches up. `maxStaleness` is the job's bound (0 for a synchronous job: no engine generates with
 * an old policy), the same the trainer applies to what it fetches.
 */
export function holdsServableWeights(machine: WeightHolding, publishedVersion: number | null, maxStaleness: number): boolean {
  if (!machine.weightsTracked || publishedVersion === null) return true;
  return machine.weightVersion !== null && machine.weightVersion >= publishedVersion - maxStaleness;
}

/** The version a machine's engine serves, as far as the control plane knows: what turns are tagged with. */
export function servedVersion(machine: WeightHolding, publishedVersion: number | null): number {
  return machine.weightVersion ?? (machine.weightsTracked ? 0 : (publishedVersion ?? 0));
}
