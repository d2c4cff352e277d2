import type { Evidence, MessageOf, Role, RolePhase } from '@robustrl/contracts';
import type { ResolvedDetectionSettings } from '../detection-settings';
import type { BlindInterval } from './blind-interval';
import type { ThroughputShares } from '../throughput-shares';

/** Messages the detector learns from (all carry the machine they are about). */
export const MACHINE_OBSERVATIONS = [
  'MachineRegistered',
  'MachineRoleChanged',
  'MachineDeregistered',
  'GpuActivitySampled',
  'RolePhaseChanged',
  'RolloutThroughputSampled',
  'RolloutRequestsObserved',
  'HeartbeatAcked',
  'AgentFaultSignalled',
] as const;
export type MachineObservation = MessageOf<(typeof MACHINE_OBSERVATIONS)[number]>;

export interface ThroughputReading {
  at: number;
  tokensPerSecond: number;
  completedRequests: number;
  inFlightRequests: number;
  awaitingTools: number;
}

/** What the detector core knows about a machine; rules read it, only the core writes it. */
export interface WatchedMachine {
  machineId: string;
  role: Role;
  zone: string;
  hardwareClass: string;
  /** `confirmed`: a fault verdict stands until the machine shows life again (re-armed). */
  /**
   * `restarting`: its task restarted (a resumed JobStarted) and it has not registered again; judged once
   * it does — its process is new, and silence while it starts says nothing about it.
   */
  status: 'watching' | 'confirmed' | 'gone' | 'restarting';
  phase: RolePhase | null;
  phaseSince: number;
  /**
   * When this incarnation began to be watched (registration, role change, re-arm after a verdict).
   * A sample older than that describes the machine before it and is not folded (see `observeMachine`).
   */
  watchedSince: number;
  lastActivityAt: number | null;
  /** The rollout's throughput as last combined from its routers' shares (throughput-shares.ts). */
  lastThroughput: ThroughputReading | null;
  /** Each router's latest sample of this rollout: router replicas each see a share of its requests. */
  throughputShares?: ThroughputShares;
}

/** Only rollouts with generation work to do are comparable: waiting on tools or idle is not slowness. */
export function isGeneratingRollout(m: WatchedMachine): boolean {
  const t = m.lastThroughput;
  return m.status === 'watching' && m.role === 'rollout' && t !== null && t.inFlightRequests - t.awaitingTools > 0;
}

/**
 * What a rule may ask about the machine's peers, answered from an index the core keeps up to date as
 * samples are folded — never a list of every machine (a job has thousands; a rule runs per sample).
 * Each answer costs O(log N) in the machines of the job.
 */
export interface PeerView {
  /** How many other machines are generating rollouts (`isGeneratingRollout`). */
  generatingRollouts(): number;
  /** The median of their last tokens/s (NaN when there are none). */
  medianTokensPerSecond(): number;
}

export interface RuleContext {
  now: number;
  machine: WatchedMachine;
  /** The other machines of the job, as statistics (e.g. for a peer median). */
  peers: PeerView;
  settings: ResolvedDetectionSettings;
}

/** What `dueAt` may read: the machine and the settings, not the time (a deadline is what it computes). */
export type DueContext = Pick<RuleContext, 'machine' | 'settings'>;

/**
 * What a rule concludes about a machine at a moment:
 *  - `confirm`: a fault, acted on at once;
 *  - `probe`: possibly a fault; the core asks the machine's agent for a heartbeat and confirms only
 *    if it stays silent past the probe timeout (paper §4 ➁);
 *  - `suspect`: worth reporting to operators, not acted on (e.g. a straggler).
 * `since` is when the fault evidence began; verdict time − since is the detection latency.
 */
export type Finding =
  | { verdict: 'confirm'; since: number; evidence: Evidence; machineFaulty: boolean }
  | { verdict: 'probe'; since: number; evidence: Evidence }
  | { verdict: 'suspect'; since: number; evidence: Evidence };

/**
 * A detection rule, pluggable per role: new rules (stragglers, silent data corruption) are added by
 * writing one of these and listing it, without touching the core.
 *
 * A rule folds the observations of one machine into its private state (`observe`) and looks at that
 * state at a given time (`evaluate`). Both are pure; time arrives as an input.
 */
export interface DetectionRule<State = unknown> {
  readonly name: string;
  /**
   * The rule concludes from how long something lasted (silence, idleness, slowness) rather than from a
   * signal the machine sent. Such a rule cannot conclude anything while the detector is blind to its
   * input, nor during the grace period after (docs/contributors/detection.md "Detection knows when it is blind").
   */
  readonly timeWindowed: boolean;
  appliesTo(role: Role): boolean;
  initialState(at: number): State;
  observe(state: State, message: MachineObservation, at: number, ctx: RuleContext): State;
  evaluate(state: State, ctx: RuleContext): Finding | null;
  /** The state with a blind interval discounted: the time anchors its windows count from move past the gap. */
  discountBlindness(state: State, blind: BlindInterval): State;
  /**
   * The earliest time `evaluate` could find something given no new input (null: not before an input
   * changes the state). Ticks evaluate a machine only once one of its rules is due, so a tick costs what
   * is due, not the size of the job. A rule's finding may only appear with time (null → finding), never
   * vanish with it: evidence goes away on an input, and inputs are evaluated when they arrive.
   * A rule without `dueAt` is evaluated on every tick (fine for a small job or a rare rule).
   */
  dueAt?(state: State, ctx: DueContext): number | null;
}
