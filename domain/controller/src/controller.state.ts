import type { DecisionRule, Draft, Handover, MessageOf, RecoveryAction, Role, TrainingMode } from '@robustrl/contracts';
import type { JobCommand } from '@robustrl/domain-kit';
import type { OpenSuspicions } from './open-suspicions';

/**
 * The controller's view of one job (paper Figure 7): the roster of machines, the step and checkpoint,
 * and every recovery with the commands it issued and who still owes an answer.
 */
export const CONTROLLER_INPUT_TYPES = [
  'JobStarted',
  'MachineRegistered',
  'MachineRoleChanged',
  'MachineDeregistered',
  'RolePhaseChanged',
  'RolloutThroughputSampled',
  'TrainingStepStarted',
  'TrainingStepCompleted',
  'CheckpointSaved',
  'FaultConfirmed',
  // Open suspicions: no warm standby is lent from a machine under one (open-suspicions.ts).
  'FaultSuspected',
  'SuspicionCleared',
  'RecoveryCommandSucceeded',
  'RecoveryCommandFailed',
] as const;
export const CONTROLLER_OUTPUT_TYPES = [
  'RecoveryDecided',
  'RestartTrainerGroup',
  'PromoteRolloutToTrainer',
  'ReplaceMachine',
  'RestartRolloutEngine',
  'RestartTask',
  'RecoveryCommandFailed',
  'RecoveryCompleted',
] as const;
type ControllerInputType = (typeof CONTROLLER_INPUT_TYPES)[number];
type ControllerOutputType = (typeof CONTROLLER_OUTPUT_TYPES)[number];
export type ControllerInput = MessageOf<ControllerInputType>;
export type ControllerEvent = MessageOf<ControllerInputType | ControllerOutputType>;
export type ControllerCommand = JobCommand<ControllerInput>;
/** What decide returns: an output before the host envelopes it. */
export type ControllerDraft = Draft<ControllerOutputType>;
/** What evolve folds: an event of the controller's stream, or one of its own outputs before it is enveloped. */
export type ControllerFact = Draft<ControllerInputType | ControllerOutputType>;

export interface ControllerSettings {
  /** A command with no answer after this long has failed (a dead agent cannot say so itself). */
  commandTimeoutMs: number;
  /**
   * `role-based` (paper Fig. 7): restart or replace only the failed role. `task-restart`: every fault
   * restarts the whole task in place — what ByteRobust-style systems do; the simulator's baseline.
   */
  policy: 'role-based' | 'task-restart';
  /**
   * In-place restarts of a rollout engine a machine may have within `engineRestartWindowMs` before a
   * process fault replaces the machine instead: a crashing engine restarts in seconds, a
   * machine that keeps crashing it is not healthy. 0 replaces at once (every rollout fault is a replacement).
   */
  engineRestartBudget: number;
  engineRestartWindowMs: number;
  /**
   * Restarts of a trainer machine for its own faults (in place or by a task restart) within
   * `machineRestartWindowMs` after which its next fault retires it (machine-restart-budget.ts). 0 never retires.
   */
  machineRestartBudget: number;
  machineRestartWindowMs: number;
}
/** Ten minutes covers a trainer re-initialisation and checkpoint reload of a large model (paper Fig. 14). */
export const DEFAULT_CONTROLLER_SETTINGS: ControllerSettings = {
  commandTimeoutMs: 600_000,
  policy: 'role-based',
  engineRestartBudget: 2,
  engineRestartWindowMs: 3_600_000,
  machineRestartBudget: 2,
  machineRestartWindowMs: 3_600_000,
};

export interface RosterMachine {
  machineId: string;
  role: Role;
  zone: string;
  hardwareClass: string;
  /** `isolated`: taken out by a recovery (a promoted rollout stays active, its role changes). */
  status: 'active' | 'isolated' | 'gone';
  /** Rollout work in flight at the last throughput sample: the warm standby is the least busy. */
  inFlightRequests: number;
  /** The registered agent process (MachineRegistered.incarnation); commands are addressed to it. */
  incarnation: string | null;
  /** Its agent's API (MachineRegistered.agentAddress): where a re-formed trainer group meets (rank 0's host). */
  agentAddress?: string | null;
  /** Where other machines reach it (MachineRegistered.hostAddress): preferred over the agent address's host. */
  hostAddress?: string | null;
}

export type CommandType = 'RestartTrainerGroup' | 'PromoteRolloutToTrainer' | 'ReplaceMachine' | 'RestartRolloutEngine' | 'RestartTask';

export interface IssuedCommand {
  commandId: string;
  type: CommandType;
  issuedAt: number;
  /** Machines that still owe an answer (group commands are answered per machine). */
  awaiting: string[];
  status: 'pending' | 'succeeded' | 'failed';
  /** A refill of the rollout pool after a warm standby: its outcome does not gate the recovery. */
  background: boolean;
  /** For a PromoteRolloutToTrainer: the promoted machine; for a ReplaceMachine: the machine replaced. */
  subject: string | null;
  newMachineId: string | null;
  /** For a PromoteRolloutToTrainer: the trainer machine the standby takes the place of. */
  replaces?: string | null;
}

/** A departing trainer's handover as the controller keeps it (planned-handover.ts): the deadline as a time. */
export interface HandoverState {
  checkpointStep: number;
  by: number;
  status: Handover['status'];
}

export interface Recovery {
  recoveryId: string;
  verdictId: string;
  machineId: string;
  handledAs: 'trainer' | 'rollout';
  action: RecoveryAction;
  rule: DecisionRule;
  faultAt: number;
  decidedAt: number;
  detectMs: number;
  commands: Record<string, IssuedCommand>;
  commandSeq: number;
  failures: number;
  /** The step retried and the checkpoint reloaded, fixed when the recovery is decided. */
  step: number;
  checkpointStep: number | null;
  /** The retried step's batch, kept for it (null when the step had not started when the fault came). */
  batchId?: string | null;
  /** A planned trainer departure moved at the checkpoint of the step in progress (planned-handover.ts). */
  handover?: HandoverState;
  /** The trainer group as this recovery rebuilds it (standby in, faulty machine out). */
  trainerGroup: string[];
  /** When the restart stage ended (the role is back up); the reconnect stage runs until it reports in. */
  restartedAt: number | null;
  /** Machines that must report in before the recovery is complete, and when each was restarted. */
  restartedMachines: Record<string, number>;
  reportedIn: Record<string, true>;
  done: boolean;
}

/** The controller's facts: what a snapshot holds (the index is rebuilt from them). */
export interface ControllerData {
  mode: TrainingMode | null;
  /** True from JobStarted (fresh or resumed) until its first step completes: paper §5.1.2 rule 1. */
  firstIteration: boolean;
  /** When the latest step completed (its event's time): a JobStarted older than it was read late. */
  lastStepCompletedAt?: number;
  step: number;
  lastCheckpointStep: number | null;
  /** The batch the trainer began its latest step on (TrainingStepStarted): what a restart keeps. */
  stepBatch?: { step: number; batchId: string } | null;
  /** When the latest step began, how long the last completed one took and its checkpoint blocked: what a handover expects (planned-handover.ts). */
  stepStartedAt?: number;
  lastStepMs?: number;
  lastCheckpointBlockingMs?: number;
  /** Trainer faults acted on in `step`: a second one escalates (rule 2). */
  trainerFaultsInStep: { step: number; count: number };
  machines: Record<string, RosterMachine>;
  recoveries: Record<string, Recovery>;
  /** Verdicts already decided on: a redelivered FaultConfirmed decides nothing. */
  decidedVerdicts: Record<string, string>;
  /** Which recovery a command belongs to. */
  commandOwner: Record<string, string>;
  /** Per rollout machine, when each in-place engine restart was issued: the budget counts those within its window. */
  engineRestarts?: Record<string, number[]>;
  /** Per trainer machine, when each recovery restarting it for its own fault was decided: its restart budget's count. */
  trainerRestarts?: Record<string, number[]>;
  /**
   * Machines confirmed gone (machine-gone.ts) and when, until they register again: a trainer
   * restart issued to one fails at once instead of waiting out the command timeout on a dead agent.
   */
  faultyMachines?: Record<string, number>;
  /**
   * The trainer epoch of the newest group this controller formed (docs/contributors/recovery.md "Fencing"): the next group
   * restart or task restart carries one more. Absent: 0, the job's first group.
   */
  trainerEpoch?: number;
  /** The detector's open suspicions per machine (open-suspicions.ts). */
  suspicions?: OpenSuspicions;
  /** Confirmed faults seen, for the recovery's detect/decide stage latencies. */
  faults: Record<string, { at: number; detectMs: number; handledAs: 'trainer' | 'rollout' }>;
}

/**
 * What the controller keeps beside its facts so that an input costs what it concerns. A job
 * of thousands of machines accumulates a recovery per confirmed verdict — most of them report-only,
 * done from the start — and phase changes, faults and ticks only ever concern the unfinished ones.
 */
export interface ControllerIndex {
  /** The recoveries not done yet, in the order they were decided (the order of `recoveries`). */
  open: Set<string>;
  /**
   * The machine the last folded FaultConfirmed added to the roster (it overtook the registration), so
   * that deciding on the fault can see the roster as it was before it. Only read right after that fold.
   */
  learnedFromVerdict: { verdictId: string; machineId: string } | null;
}

/** The state the controller evolves in place: its facts and the index derived from them. */
export interface ControllerState extends ControllerData {
  index: ControllerIndex;
}

export const initialControllerData = (): ControllerData => ({
  mode: null,
  firstIteration: false,
  step: 0,
  lastCheckpointStep: null,
  trainerFaultsInStep: { step: 0, count: 0 },
  machines: {},
  recoveries: {},
  decidedVerdicts: {},
  commandOwner: {},
  faults: {},
});

export const initialControllerState = (): ControllerState => rebuildControllerIndex(initialControllerData());

/** The facts with their index, derived from scratch (a decoded snapshot, a spec's reference). */
export function rebuildControllerIndex(data: ControllerData): ControllerState {
  const open = new Set<string>();
  for (const r of Object.values(data.recoveries)) if (!r.done) open.add(r.recoveryId);
  return { ...data, index: { open, learnedFromVerdict: null } };
}

export function ownerOf(state: ControllerData, commandId: string): Recovery | undefined {
  const id = state.commandOwner[commandId];
  return id ? state.recoveries[id] : undefined;
}

/** The trainer group as the roster has it now: every active trainer or hybrid machine, by id. */
export function trainerGroup(state: ControllerData): string[] {
  return Object.values(state.machines)
    .filter((m) => m.status === 'active' && (m.role === 'trainer' || m.role === 'hybrid'))
    .map((m) => m.machineId)
    .sort();
}

/** Restarted and every restarted machine has reported in since. */
export function reportedInFully(r: Recovery): boolean {
  const machines = Object.keys(r.restartedMachines);
  return r.restartedAt !== null && machines.length > 0 && machines.every((m) => r.reportedIn[m]);
}

/** A machine the controller knows only from a verdict (its registration is on another topic). */
export const unknownMachine = (machineId: string, role: Role): RosterMachine => ({
  machineId,
  role,
  zone: 'unknown',
  hardwareClass: 'unknown',
  status: 'active',
  inFlightRequests: 0,
  incarnation: null,
});

/** The batch the trainer began `step` on, when it did. */
export function batchOfStep(state: Pick<ControllerState, 'stepBatch'>, step: number): string | null {
  return state.stepBatch && state.stepBatch.step === step ? state.stepBatch.batchId : null;
}

/**
 * Whether a JobStarted of time `at` precedes a step completion already folded: the two travel on
 * different topics, and a consumer replaying both may read the start last. It starts no first iteration.
 */
export const overtaken = (state: { lastStepCompletedAt?: number }, at: number): boolean =>
  state.lastStepCompletedAt !== undefined && at < state.lastStepCompletedAt;
