import { z } from 'zod';
import { command, event } from '../define-message';
import { Topics } from '../topics';
import { Evidence, IsoTime, MachineId, Role, Step, TrainerEpoch } from './common';

/** The recovery actions of paper Figure 7, plus `report-only` for rules that must not restart (stragglers). */
export const RecoveryAction = z.enum([
  'restart-trainer-group',
  'warm-standby-from-rollout',
  'request-new-trainer-machine',
  'replace-rollout',
  /** A rollout engine process failed on a healthy machine: restart it in place (seconds) before replacing the machine. */
  'restart-rollout-engine',
  'restart-task',
  'report-only',
]);
export type RecoveryAction = z.infer<typeof RecoveryAction>;

/** Why a decision was taken: the rule that fired, with the paper's escalation rules named explicitly. */
export const DecisionRule = z.enum([
  'trainer-fault',
  'trainer-machine-faulty',
  'rollout-fault',
  /** The rollout's engine process failed (exited, raised) with no hardware evidence: it restarts in place. */
  'rollout-process-fault',
  /** The machine already used its in-place engine restarts within the window: it is replaced instead. */
  'rollout-restart-budget-spent',
  /** The in-place engine restart failed or went unanswered: the machine is replaced. */
  'rollout-engine-restart-failed',
  'escalate-first-iteration',
  'escalate-repeated-fault-in-step',
  'escalate-restart-failed-twice',
  'report-only-rule',
  /** The fault hit a machine an active recovery already covers (e.g. trainer ranks hanging on a dead peer). */
  'covered-by-active-recovery',
  /**
   * A rollout verdict about a machine that is a trainer by now (lent as warm standby): its rollout went
   * quiet because the controller stopped it. The trainer rules judge the machine from here on.
   */
  'verdict-for-former-role',
  /** The job runs the whole-task-restart policy (the ByteRobust-style baseline the simulator compares against). */
  'task-restart-policy',
  /**
   * A trainer machine already restarted its budget of times within the window (a machine that fails on
   * every restart): it is retired as a faulty machine is — warm standby or a new machine — not restarted again.
   */
  'machine-restart-budget-spent',
  /**
   * A machine announced its departure (a drain, preemption or maintenance notice): it is replaced before
   * it goes, and the escalation rules do not apply — a notice is not a fault of code or configuration.
   */
  'planned-trainer-departure',
  'planned-rollout-departure',
]);
export type DecisionRule = z.infer<typeof DecisionRule>;

/**
 * A trainer machine that announced its departure is moved at the checkpoint of the step in progress
 * (docs/planned-failures.md "A trainer moves at its checkpoint"). `waiting`: the group restart waits for
 * the checkpoint of `checkpointStep` until `by` (a warm standby is promoted meanwhile); `saved`: it came,
 * and the group restarts at the step after it, none retried; `given-up`: it did not come by `by`, or the
 * machine failed first, and the step in progress is retried, as after an unplanned loss.
 */
export const Handover = z.object({
  checkpointStep: Step,
  by: IsoTime,
  status: z.enum(['waiting', 'saved', 'given-up']),
});
export type Handover = z.infer<typeof Handover>;

export const RecoveryDecided = event(
  'RecoveryDecided',
  Topics.control,
  'The controller decided how to recover from a confirmed fault: the audit trail of why.',
  z.object({
    recoveryId: z.string().min(1),
    verdictId: z.string().min(1),
    machineId: MachineId,
    action: RecoveryAction,
    rule: DecisionRule,
    step: Step,
    evidence: Evidence,
    handover: Handover.optional(),
  }),
);

const Target = { recoveryId: z.string().min(1), commandId: z.string().min(1) };

export const RestartTrainerGroup = command(
  'RestartTrainerGroup',
  Topics.control,
  'Terminate trainer processes, re-initialise, reload the last per-step checkpoint, keep the current batch.',
  z.object({
    ...Target,
    machines: z.array(MachineId).min(1),
    /** The step being retried: its batch is kept, its trajectories come from the trajectory store. */
    step: Step,
    /** The last per-step checkpoint to reload; null when none was saved yet (start from the initial weights). */
    checkpointStep: Step.nullable(),
    keepBatch: z.boolean(),
    /** Per machine, the incarnation the command is for (when the controller knows it): other incarnations ignore it. */
    incarnations: z.record(MachineId, z.string().min(1)).optional(),
    /**
     * Per member, its agent's address (when the controller knows it). `machines` is the group in rank
     * order: rank 0's host is where the group meets again (a re-formed group was not told).
     */
    agentAddresses: z.record(MachineId, z.string().min(1)).optional(),
    /** Per member, the address other machines reach it at (MachineRegistered.hostAddress): rank 0's is where the group meets. */
    hostAddresses: z.record(MachineId, z.string().min(1)).optional(),
    /** The batch the retried step began on, which it keeps (absent when the step had not started). */
    batchId: z.string().min(1).optional(),
    /**
     * The trainer epoch this group is formed at: one more than every group before it (docs/contributors/recovery.md "Fencing").
     * A trainer of an older epoch is stale: its agent stops it once it reads a newer group formed without
     * its machine, and the weight registry refuses its publications. Absent from older controllers.
     */
    trainerEpoch: TrainerEpoch.optional(),
  }),
);

export const PromoteRolloutToTrainer = command(
  'PromoteRolloutToTrainer',
  Topics.control,
  'Take a healthy rollout machine into the trainer group as warm standby (paper §5.1.3).',
  z.object({
    ...Target,
    rolloutMachineId: MachineId,
    replacesMachineId: MachineId,
    /** The rollout's incarnation the promotion is for (when known): another incarnation ignores it. */
    incarnation: z.string().min(1).optional(),
    /** Where records are signed: the lent machine's trainer certificate, shown again in its MachineRoleChanged. */
    roleCertificate: z.string().min(1).max(200).optional(),
  }),
);

export const ReplaceMachine = command(
  'ReplaceMachine',
  Topics.control,
  'Isolate a machine and ask the orchestrator for a new one in the same zone and hardware class.',
  z.object({
    ...Target,
    machineId: MachineId,
    /** The role the new machine joins: a faulty trainer replaced through a warm standby is refilled as a rollout. */
    role: Role,
    zone: z.string().min(1),
    hardwareClass: z.string().min(1),
  }),
);

export const RestartRolloutEngine = command(
  'RestartRolloutEngine',
  Topics.control,
  'Restart the rollout engine process on its (healthy) machine in place; the machine re-registers and serves again once it holds the current weights.',
  z.object({
    ...Target,
    machineId: MachineId,
    /** Which in-place restart of this machine within the budget's window this is (1 = the first). */
    attempt: z.int().positive(),
    /** In-place restarts a machine may have within the window before it is replaced instead. */
    budget: z.int().positive(),
    /** The agent incarnation the command is for (when known): another incarnation ignores it. */
    incarnation: z.string().min(1).optional(),
  }),
);

export const RestartTask = command(
  'RestartTask',
  Topics.control,
  'Restart the whole RL task: only when an escalation rule of paper §5.1.2 fires.',
  z.object({
    ...Target,
    rule: DecisionRule,
    /** The trainer epoch the restarted task's group starts at (docs/contributors/recovery.md "Fencing"); the resumed JobStarted carries it. */
    trainerEpoch: TrainerEpoch.optional(),
  }),
);

/** Group commands (a trainer group restart) are answered per machine, by each machine's agent. */
const Executor = {
  machineId: MachineId.nullable(),
  /** Who carried the command out, e.g. `agent/host-3` or `orchestrator/kubernetes`. */
  executor: z.string().min(1),
};

export const RecoveryCommandSucceeded = event(
  'RecoveryCommandSucceeded',
  Topics.replies,
  'A recovery command was carried out (for a group command: on one machine).',
  z.object({
    ...Target,
    ...Executor,
    durationMs: z.int().nonnegative(),
    /** The machine a ReplaceMachine command brought in. */
    newMachineId: MachineId.optional(),
  }),
);

export const RecoveryCommandFailed = event(
  'RecoveryCommandFailed',
  Topics.replies,
  'A recovery command could not be carried out; two failed restarts escalate (paper §5.1.2 rule 3).',
  z.object({ ...Target, ...Executor, durationMs: z.int().nonnegative(), error: z.string().min(1) }),
);

export const RecoveryCompleted = event(
  'RecoveryCompleted',
  Topics.control,
  'A recovery finished; stage latencies feed the ETTR projections and the recovery trace.',
  z.object({
    recoveryId: z.string().min(1),
    outcome: z.enum(['recovered', 'escalated', 'abandoned']),
    stagesMs: z.object({
      detect: z.int().nonnegative(),
      decide: z.int().nonnegative(),
      restart: z.int().nonnegative(),
      reconnect: z.int().nonnegative(),
    }),
  }),
);

/** The rollout pool's size is elastic (paper §3, ElasticRayWorkerGroup): grown or shrunk by command. */
export const ScaleRolloutPool = command(
  'ScaleRolloutPool',
  Topics.control,
  'Bring the serving rollout machines of one zone and hardware class to a target count; the rollout manager carries it out.',
  z.object({
    commandId: z.string().min(1),
    targetMachines: z.int().nonnegative(),
    zone: z.string().min(1),
    hardwareClass: z.string().min(1),
    reason: z.string().min(1).max(2000),
  }),
);

const ScaleOutcome = {
  commandId: z.string().min(1),
  /** Serving machines of the zone and class before and after. */
  from: z.int().nonnegative(),
  to: z.int().nonnegative(),
  added: z.array(MachineId),
  removed: z.array(MachineId),
  durationMs: z.int().nonnegative(),
};

export const RolloutPoolScaled = event(
  'RolloutPoolScaled',
  Topics.control,
  'A ScaleRolloutPool command was carried out: machines added, or released after their trajectories moved.',
  z.object(ScaleOutcome),
);

export const RolloutPoolScaleFailed = event(
  'RolloutPoolScaleFailed',
  Topics.control,
  'A ScaleRolloutPool command could not be fully carried out; what was done is listed.',
  z.object({ ...ScaleOutcome, error: z.string().min(1) }),
);
