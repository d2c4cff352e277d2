/**
 * The controller as it was before it evolved in place: every fold a new state, every decision
 * a walk over every recovery. Kept, out of the build, as the reference the in-place controller is held
 * to (`controller-in-place.spec.ts`): these files are the previous implementation, with the
 * rules changed since applied to both (a restarted group is told its members' addresses and
 * the batch it keeps).
 */
import type { DecisionRule, Draft, MessageOf, RecoveryAction, Role, TrainingMode } from '@robustrl/contracts';
import type { JobCommand } from '@robustrl/domain-kit';
import type { OpenSuspicions } from '../open-suspicions';
import type { HandoverState } from '../controller.state';

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
  handover?: HandoverState;
  /** The retried step's batch, kept for it (null when the step had not started when the fault came). */
  batchId?: string | null;
  /** The trainer group as this recovery rebuilds it (standby in, faulty machine out). */
  trainerGroup: string[];
  /** When the restart stage ended (the role is back up); the reconnect stage runs until it reports in. */
  restartedAt: number | null;
  /** Machines that must report in before the recovery is complete, and when each was restarted. */
  restartedMachines: Record<string, number>;
  reportedIn: Record<string, true>;
  done: boolean;
}

export interface ControllerState {
  mode: TrainingMode | null;
  /** True from JobStarted (fresh or resumed) until its first step completes: paper §5.1.2 rule 1. */
  firstIteration: boolean;
  /** When the latest step completed (its event's time): a JobStarted older than it was read late. */
  lastStepCompletedAt?: number;
  step: number;
  lastCheckpointStep: number | null;
  /** The batch the trainer began its latest step on (TrainingStepStarted): what a restart keeps. */
  stepBatch?: { step: number; batchId: string } | null;
  /** Trainer faults acted on in `step`: a second one escalates (rule 2). */
  stepStartedAt?: number;
  lastStepMs?: number;
  lastCheckpointBlockingMs?: number;
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

export const initialControllerState = (): ControllerState => ({
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

export function ownerOf(state: ControllerState, commandId: string): Recovery | undefined {
  const id = state.commandOwner[commandId];
  return id ? state.recoveries[id] : undefined;
}

/** The trainer group as the roster has it now: every active trainer or hybrid machine, by id. */
export function trainerGroup(state: ControllerState): string[] {
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
