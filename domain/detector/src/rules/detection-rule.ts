import type { Evidence, MessageOf, Role, RolePhase } from '@robustrl/contracts';
import type { ResolvedDetectionSettings } from '../detection-settings';
import type { BlindInterval } from './blind-interval';

/** Messages the detector learns from (all carry the machine they are about). */
export const MACHINE_OBSERVATIONS = [
  'MachineRegistered',
  'MachineRoleChanged',
  'MachineDeregistered',
  'GpuActivitySampled',
  'RolePhaseChanged',
  'RolloutThroughputSampled',
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
  status: 'watching' | 'confirmed' | 'gone';
  phase: RolePhase | null;
  phaseSince: number;
  lastActivityAt: number | null;
  lastThroughput: ThroughputReading | null;
}

export interface RuleContext {
  now: number;
  machine: WatchedMachine;
  /** Every other machine of the job, e.g. for a peer median. */
  peers: readonly WatchedMachine[];
  settings: ResolvedDetectionSettings;
}

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
   * input, nor during the grace period after (README "Detection knows when it is blind").
   */
  readonly timeWindowed: boolean;
  appliesTo(role: Role): boolean;
  initialState(at: number): State;
  observe(state: State, message: MachineObservation, at: number, ctx: RuleContext): State;
  evaluate(state: State, ctx: RuleContext): Finding | null;
  /** The state with a blind interval discounted: the time anchors its windows count from move past the gap. */
  discountBlindness(state: State, blind: BlindInterval): State;
}
