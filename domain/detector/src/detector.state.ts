import type { Draft, Evidence, InputGapReason, MessageOf, Role } from '@robustrl/contracts';
import type { JobCommand } from '@robustrl/domain-kit';
import { PAPER_DETECTION_DEFAULTS, ResolvedDetectionSettings } from './detection-settings';
import { DetectorIndex } from './detector-index';
import { DEFAULT_DETECTION_RULES, DetectionRule, MACHINE_OBSERVATIONS, MachineObservation, RuleContext, WatchedMachine } from './rules';

/**
 * The detector's view of one job (paper §4): the machines it watches, each rule's private state per
 * machine, the suspicions open (with their heartbeat probes) and when each machine was last confirmed.
 *
 * The state evolves in place (the decider is `in-place`): a job of thousands of machines folds a
 * telemetry sample by updating that machine's entry, O(1) in the size of the job, never by copying the
 * machine table. `index` is derived from the rest (due deadlines, the throughput ranking) and is not
 * part of snapshots.
 */
export const DETECTOR_INPUT_TYPES = ['JobStarted', ...MACHINE_OBSERVATIONS] as const;
/**
 * What the detector's host tells it about its own input (docs/contributors/detection.md "Detection knows when it is blind"):
 * not read from the bus but recorded by the host when its input has a gap and when the gap closes.
 */
export const DETECTOR_HOST_INPUT_TYPES = ['DetectionPaused', 'DetectionResumed'] as const;
export const DETECTOR_OUTPUT_TYPES = ['FaultSuspected', 'HeartbeatProbeRequested', 'FaultConfirmed', 'SuspicionCleared'] as const;

export type DetectorInput = MachineObservation | MessageOf<'JobStarted'> | MessageOf<(typeof DETECTOR_HOST_INPUT_TYPES)[number]>;
export type DetectorOutput = MessageOf<(typeof DETECTOR_OUTPUT_TYPES)[number]>;
/** What decide returns: an output before the host envelopes it. */
export type DetectorDraft = Draft<(typeof DETECTOR_OUTPUT_TYPES)[number]>;
export type DetectorEvent = DetectorInput | DetectorOutput;
export type DetectorCommand = JobCommand<DetectorInput>;

/** What a detector is built with: the rules it runs and the windows a job gets unless it names its own. */
export interface DetectorConfig {
  rules: readonly DetectionRule[];
  defaults: ResolvedDetectionSettings;
}
export const PAPER_DETECTOR_CONFIG: DetectorConfig = { rules: DEFAULT_DETECTION_RULES, defaults: PAPER_DETECTION_DEFAULTS };

export interface OpenSuspicion {
  verdictId: string;
  machineId: string;
  rule: string;
  since: number;
  evidence: Evidence;
  /** Set while a heartbeat probe is outstanding. */
  probe: { probeId: string; sentAt: number; timeoutMs: number } | null;
}

export interface DetectorState {
  settings: ResolvedDetectionSettings;
  machines: Record<string, WatchedMachine>;
  /** Per machine, per rule name: the rule's private state. */
  ruleStates: Record<string, Record<string, unknown>>;
  /** Keyed by `${machineId}|${rule}`. */
  suspicions: Record<string, OpenSuspicion>;
  confirmedAt: Record<string, number>;
  /** The last verdict number used: verdict ids are `<machine>/<rule>/<n>`, so deciding twice yields the same ids. */
  verdictSeq: number;
  /** Set while the detector's input has a gap (DetectionPaused → DetectionResumed): time-based rules conclude nothing. */
  blind: { since: number; reason: InputGapReason } | null;
  /** After a gap, time-based rules conclude nothing before this moment (null: no grace running). */
  graceUntil: number | null;
  /** The newest event time folded so far (0 before any): the index's "now" when rebuilt from a snapshot. */
  foldedUntil: number;
  /** Derived, not in snapshots: see `detector-index.ts`. */
  index: DetectorIndex;
}

export const initialDetectorState = (config: DetectorConfig): DetectorState => ({
  settings: config.defaults,
  machines: {},
  ruleStates: {},
  suspicions: {},
  confirmedAt: {},
  verdictSeq: 0,
  blind: null,
  graceUntil: null,
  foldedUntil: 0,
  index: new DetectorIndex(),
});

/** Whether a time-based rule may conclude anything about the job at `now`: not while blind, not during the grace after. */
export const windowsMayConclude = (state: DetectorState, now: number): boolean =>
  state.blind === null && (state.graceUntil === null || now >= state.graceUntil);

/**
 * `<machine>|<rule>`, the key of a suspicion. Looked up per rule on every sample (tens of
 * thousands a step): the keys are made once per machine and rule, and a made string keeps its hash.
 */
export function suspicionKey(machineId: string, rule: string): string {
  let keys = SUSPICION_KEYS.get(machineId);
  if (!keys) {
    // Bounded: a service that outlives many jobs starts the memo over rather than keep every machine.
    if (SUSPICION_KEYS.size >= 100_000) SUSPICION_KEYS.clear();
    SUSPICION_KEYS.set(machineId, (keys = new Map()));
  }
  let key = keys.get(rule);
  if (key === undefined) keys.set(rule, (key = `${machineId}|${rule}`));
  return key;
}
/** A memo of a pure function (what it returns depends only on its arguments), shared by every detector. */
const SUSPICION_KEYS = new Map<string, Map<string, string>>();

/** The machine's open suspicions, one per rule at most: O(rules), not O(suspicions of the job). */
export function suspicionsOf(config: DetectorConfig, state: DetectorState, machineId: string): OpenSuspicion[] {
  const out: OpenSuspicion[] = [];
  for (const rule of config.rules) {
    const s = state.suspicions[suspicionKey(machineId, rule.name)];
    if (s) out.push(s);
  }
  return out;
}

/** Hybrid machines (trainer and rollout colocated) are recovered as trainers. */
export const handledAs = (role: Role): 'trainer' | 'rollout' => (role === 'rollout' ? 'rollout' : 'trainer');

export function rulesFor(config: DetectorConfig, m: WatchedMachine): readonly DetectionRule[] {
  // Per config and role, listed once (a sample asks for its machine's rules twice: fold and decide).
  let byRole = RULES_BY_ROLE.get(config);
  if (!byRole) RULES_BY_ROLE.set(config, (byRole = new Map()));
  let rules = byRole.get(m.role);
  if (!rules) byRole.set(m.role, (rules = config.rules.filter((r) => r.appliesTo(m.role))));
  return rules;
}
const RULES_BY_ROLE = new WeakMap<DetectorConfig, Map<string, readonly DetectionRule[]>>();

export const freshRuleStates = (config: DetectorConfig, m: WatchedMachine, at: number) =>
  Object.fromEntries(rulesFor(config, m).map((r) => [r.name, r.initialState(at)]));

export const contextFor = (state: DetectorState, machine: WatchedMachine, now: number): RuleContext => ({
  now,
  machine,
  peers: state.index.peersOf(machine.machineId),
  settings: state.settings,
});

/** The number at the end of a verdict id (`<machine>/<rule>/<n>`). */
export function seqOf(verdictId: string): number {
  const n = Number(verdictId.slice(verdictId.lastIndexOf('/') + 1));
  return Number.isFinite(n) ? n : 0;
}
