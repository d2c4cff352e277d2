import { SeededRandom } from '@robustrl/sim';

/**
 * The seeded fault schedule of the whole-system chaos campaign: which fault comes next and
 * how long after the system settled from the previous one. Pure: the same seed and mix give the same
 * schedule, so a failing campaign can be run again fault for fault.
 */
export const FAULT_KINDS = [
  /** kill -9 of a trainer rank's process (its machine and agent stay): restart in place. */
  'kill-trainer-process',
  /** kill -9 of a rollout's engine process: the engine restarts in place. */
  'kill-engine-process',
  /** kill -9 of a trainer machine's agent and everything under it (machine loss): warm standby. */
  'kill-trainer-machine',
  /** kill -9 of a rollout machine's agent and its engine (machine loss): the machine is replaced. */
  'kill-rollout-machine',
  /** kill -9 of one control-plane service (detector, request manager, rollout manager, weight registry, controller), started again. */
  'kill-service',
  /** A trainer process is killed, and the controller with kill -9 while it recovers from that. */
  'kill-controller-mid-recovery',
  /** The broker stopped and started again. */
  'restart-broker',
  /** PostgreSQL stopped and started again. */
  'restart-postgres',
  /** kill -9 of a rollout's engine while its agent loads a new version into it (jobs whose agents load engines). */
  'kill-engine-during-load',
  /** kill -9 of a trainer rank the moment it starts writing a checkpoint (jobs with distributed checkpoints). */
  'kill-trainer-during-checkpoint',
  /** A rack lost: a trainer machine and one or two rollout machines killed at once (cluster-faults.ts). */
  'rack',
  /** A trainer process killed, and again as its recovery completes, in the same step: rule 2 escalates. */
  'second-trainer-fault-in-step',
  /** A trainer that fails on every restart: killed again after each recovery until the machine is retired. */
  'flapping-trainer',
  /** A trainer process killed, its peer's machine lost during the restart, the standby's during its promotion: rule 3 escalates. */
  'machines-lost-during-recovery',
  /** A machine cut from the broker only, then healed (network-namespace hosts; partition-faults.ts). */
  'partition-from-broker',
  /** A machine cut from the control plane (router, HTTP APIs) with the broker still reachable, then healed. */
  'partition-from-control-plane',
  /** A machine cut from its peers only, then healed. */
  'partition-from-peers',
  /** A machine cut from everything, then healed. */
  'partition-full',
  /** PostgreSQL slowed to seconds a write (latency on its connections), not stopped (degraded-faults.ts). */
  'slow-postgres',
  /** A machine's clock stepped minutes ahead or behind, and back. */
  'clock-skew',
  /** SIGSTOP of a rollout's engine as its agent begins a weight load (jobs whose agents load engines). */
  'stop-engine-during-load',
  /** SIGTERM to a trainer machine's agent with a pod's grace period, the machine gone when it ends (planned-faults.ts). */
  'drain-trainer-machine',
  /** The same drain of a rollout machine. */
  'drain-rollout-machine',
  /** A preemption notice with its deadline reported on a trainer machine, the machine gone at the deadline. */
  'preempt-trainer-machine',
  /** The same preemption of a rollout machine. */
  'preempt-rollout-machine',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * The campaign's default mix: role and machine faults most often, infrastructure faults a few times
 * each. The kinds a job must support (a load into its engines, a checkpoint write to interrupt) weigh
 * 0 here; the job that has them gives them weight (chaos-job.ts).
 */
export const DEFAULT_FAULT_WEIGHTS: Record<FaultKind, number> = {
  'kill-trainer-process': 3,
  'kill-engine-process': 3,
  'kill-trainer-machine': 2,
  'kill-rollout-machine': 2,
  'kill-service': 3,
  'kill-controller-mid-recovery': 2,
  'restart-broker': 1,
  'restart-postgres': 1,
  'kill-engine-during-load': 0,
  'kill-trainer-during-checkpoint': 0,
  rack: 1,
  'second-trainer-fault-in-step': 1,
  'flapping-trainer': 1,
  'machines-lost-during-recovery': 1,
  // Network-namespace hosts only: a campaign on them gives these weight (system-chaos.ts).
  'partition-from-broker': 0,
  'partition-from-control-plane': 0,
  'partition-from-peers': 0,
  'partition-full': 0,
  'slow-postgres': 1,
  'clock-skew': 1,
  'stop-engine-during-load': 0,
  // Planned failures: a campaign that compares them with machine losses gives them weight (--mix; docs/planned-failures.md).
  'drain-trainer-machine': 0,
  'drain-rollout-machine': 0,
  'preempt-trainer-machine': 0,
  'preempt-rollout-machine': 0,
};

export const CONTROL_PLANE_SERVICES = ['detector', 'controller', 'request-manager', 'rollout-manager', 'weight-registry'] as const;
export type ControlPlaneService = (typeof CONTROL_PLANE_SERVICES)[number];

export interface ScheduledFault {
  index: number;
  kind: FaultKind;
  /** Seconds to wait, once the system settled from the previous fault, before this one. */
  afterSeconds: number;
  /** Seconds the target stays down (services, broker, PostgreSQL) before it is started again. */
  downSeconds: number;
  /** Picks the target among the candidates present when the fault is injected (0 ≤ pick < 1). */
  pick: number;
  /**
   * Injected on top of the previous fault, without waiting for the system to settle (a second fault
   * while a recovery is open): drawn on purpose, with `overlap` of ScheduleOptions. The first never is.
   */
  overlaps: boolean;
}

export interface ScheduleOptions {
  seed: number;
  faults: number;
  weights?: Partial<Record<FaultKind, number>>;
  /** Gap after the system settled, uniformly in [min, max]. */
  gapSeconds?: { min: number; max: number };
  downSeconds?: { min: number; max: number };
  /** The share of faults injected on top of the previous one (0 ≤ overlap ≤ 1; default 0.25). */
  overlap?: number;
}

/**
 * The schedule: every kind of positive weight appears at least once when there are enough faults (so a
 * campaign of 20 faults always covers the whole mix), the rest drawn by weight; the order is shuffled.
 */
export function faultSchedule(options: ScheduleOptions): ScheduledFault[] {
  const weights = { ...DEFAULT_FAULT_WEIGHTS, ...options.weights };
  const kinds = FAULT_KINDS.filter((k) => weights[k] > 0);
  if (kinds.length === 0) throw new Error('the fault mix has no kind with a positive weight');
  if (!Number.isInteger(options.faults) || options.faults < 0) throw new Error(`faults must be a non-negative integer, got ${options.faults}`);
  const rng = new SeededRandom(options.seed);
  const random = () => rng.next();
  const gap = options.gapSeconds ?? { min: 2, max: 12 };
  const down = options.downSeconds ?? { min: 1, max: 8 };
  const total = kinds.reduce((sum, k) => sum + weights[k], 0);
  const draw = (): FaultKind => {
    let x = random() * total;
    for (const k of kinds) if ((x -= weights[k]) < 0) return k;
    return kinds[kinds.length - 1];
  };
  const chosen: FaultKind[] = options.faults >= kinds.length ? [...kinds] : [];
  while (chosen.length < options.faults) chosen.push(draw());
  for (let i = chosen.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [chosen[i], chosen[j]] = [chosen[j], chosen[i]];
  }
  const between = (r: { min: number; max: number }) => Math.round((r.min + random() * (r.max - r.min)) * 10) / 10;
  const drawn = chosen.map((kind, index) => ({ index, kind, afterSeconds: between(gap), downSeconds: between(down), pick: random() }));
  // Overlaps from a stream of their own: the rest of a seed's schedule is what it was without them.
  const overlap = options.overlap ?? 0.25;
  if (!(overlap >= 0 && overlap <= 1)) throw new Error(`overlap must be between 0 and 1, got ${overlap}`);
  const overlaps = new SeededRandom(options.seed ^ 0x5eed0f);
  return drawn.map((f) => ({ ...f, overlaps: overlaps.next() < overlap && f.index > 0 && !SHOWS_AN_ESCALATION.has(f.kind) }));
}

/**
 * Kinds that are faults during a recovery by construction, each made to fire one escalation rule (paper
 * §5.1.2: rule 2, a second fault in the step; rule 3, a restart failing twice). On top of another fault
 * the step already holds that fault, and rule 2 answers first whatever they do; so they wait for the
 * system to settle, and the campaign's rules 2 and 3 are each shown by the kind made for it.
 */
const SHOWS_AN_ESCALATION: ReadonlySet<FaultKind> = new Set(['second-trainer-fault-in-step', 'machines-lost-during-recovery']);

/** `kind=weight,kind=weight`: the mix of `--mix`; kinds not named keep their default weight. */
export function parseFaultMix(text: string): Partial<Record<FaultKind, number>> {
  const mix: Partial<Record<FaultKind, number>> = {};
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [name, value] = part.split('=');
    if (!(FAULT_KINDS as readonly string[]).includes(name)) throw new Error(`unknown fault kind '${name}': one of ${FAULT_KINDS.join(', ')}`);
    const weight = Number(value);
    if (!Number.isFinite(weight) || weight < 0) throw new Error(`the weight of ${name} must be a number ≥ 0, got '${value}'`);
    mix[name as FaultKind] = weight;
  }
  return mix;
}

/** The candidate `pick` chooses (candidates in a stable order), or undefined when there is none. */
export function pickOf<T>(candidates: readonly T[], pick: number): T | undefined {
  return candidates.length === 0 ? undefined : candidates[Math.min(candidates.length - 1, Math.floor(pick * candidates.length))];
}
