import type { DecisionRule, RecoveryAction, Role, TrainingMode } from '@robustrl/contracts';

export interface RosterMachine {
  machineId: string;
  role: Role;
  zone: string;
  hardwareClass: string;
  /** `isolated`: taken out by a recovery (a promoted rollout stays active, its role changes). */
  status: 'active' | 'isolated' | 'gone';
  /** Rollout work in flight at the last throughput sample: the warm standby is the least busy. */
  inFlightRequests: number;
}

export type CommandType = 'RestartTrainerGroup' | 'PromoteRolloutToTrainer' | 'ReplaceMachine' | 'RestartTask';

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
  step: number;
  lastCheckpointStep: number | null;
  /** Trainer faults acted on in `step`: a second one escalates (rule 2). */
  trainerFaultsInStep: { step: number; count: number };
  machines: Record<string, RosterMachine>;
  recoveries: Record<string, Recovery>;
  /** Verdicts already decided on: a redelivered FaultConfirmed decides nothing. */
  decidedVerdicts: Record<string, string>;
  /** Which recovery a command belongs to. */
  commandOwner: Record<string, string>;
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
