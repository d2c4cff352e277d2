import { DecisionRule, draft, Evidence, MessageOf, RecoveryAction } from '@robustrl/contracts';
import { assertNever } from '@robustrl/domain-kit';
import { applyOutcome, withOutcome } from './command-outcome';
import {
  ControllerCommand,
  ControllerData,
  ControllerDraft,
  ControllerSettings,
  ControllerState,
  ownerOf,
  RosterMachine,
  Recovery,
  reportedInFully,
  trainerGroup,
  unknownMachine,
} from './controller.state';
import { firstIterationFault, repeatedFaultInStep, restartFailedTwice } from './escalation-rules';
import { completed, decision, replaceMachine, restartRolloutEngine, restartTask, restartTrainerGroup, restartTrainerGroupOf } from './recovery-commands';
import { verdictFailsCommand, verdictMeansMachineGone } from './machine-gone';
import { machineRestartBudgetSpent, stoppedByItsLease, trainerRestartsInWindow } from './machine-restart-budget';
import { engineRestartBudgetSpent, engineRestartsInWindow } from './rollout-engine-restarts';
import { coveringRecovery, faultyTrainerMachine } from './recovery-plans';
import { departureEvidence, plannedDeparture } from './planned-departures';
import {
  awaitingCheckpoint,
  checkpointForHandover,
  handoverEnded,
  handoverEvidence,
  handoverPastDeadline,
  moveFromDepartingMachine,
  planHandover,
} from './planned-handover';

/**
 * The controller's decisions (paper Figure 7), one named step per input:
 *
 *   FaultConfirmed            → decideOnFault: the first fault policy that applies decides (FAULT_POLICIES)
 *   RecoveryCommandSucceeded  → commandSucceeded: the recovery's next command, or its completion
 *   RecoveryCommandFailed     → commandFailed: retry, escalate (rule 3), or a faulty trainer machine
 *   MachineRegistered / RolePhaseChanged → lifeSign: a restarted machine reported in (reconnect stage)
 *   CheckpointSaved           → checkpointForHandover: a departing trainer's step is saved, the group moves
 *   tick                      → handoverPastDeadline, timedOutCommands: a wait or a command ran out of time
 *
 * The controller evolves in place, so decide reads the state with the message folded in. Outcomes and
 * life signs are decided on just that; a fault on the state before it, which differs only when the
 * verdict brought an unknown machine into the roster (`beforeVerdict`). A redelivered verdict is
 * recognised as decided either way. decide never writes the state: where it must see an output of its
 * own before deciding further (a timed-out command), it reads a view with that output folded into a
 * copy of the one recovery it changes (`withOutcome`).
 */
export function decideController(settings: ControllerSettings) {
  return (command: ControllerCommand, state: ControllerState): ControllerDraft[] => {
    if (command.kind === 'tick') return handoverPastDeadline(state, command.now, regroup) ?? timedOutCommands(settings, state, command.now);
    const { message, now } = command;
    switch (message.type) {
      case 'FaultConfirmed':
        return decideOnFault(FAULT_POLICIES, settings, beforeVerdict(state, message.data.verdictId), message, now);
      case 'RecoveryCommandSucceeded':
        return commandSucceeded(state, message.data.commandId, now);
      case 'RecoveryCommandFailed':
        return commandFailed(state, message.data, now);
      case 'RolePhaseChanged':
      case 'MachineRegistered':
        return lifeSign(state, message.data.machineId, now);
      case 'CheckpointSaved':
        return checkpointForHandover(state, message.data.step, now, regroup);
      case 'JobStarted':
      case 'MachineRoleChanged':
      case 'MachineDeregistered':
      case 'RolloutThroughputSampled':
      case 'TrainingStepStarted':
      case 'TrainingStepCompleted':
      case 'FaultSuspected':
      case 'SuspicionCleared':
        return []; // the picture changes (evolve), nothing to decide
      default:
        return assertNever(message, 'controller input');
    }
  };
}

// ── deciding on a fault ──────────────────────────────────────────────────────────────────────

/**
 * The state a fault is decided on: as it was before the verdict was folded. The fold adds the verdict's
 * fault record (which no decision reads) and, when the verdict overtook the machine's registration, the
 * machine — left out here, as it was: rare, so copying the roster for it is cheap.
 */
function beforeVerdict(state: ControllerState, verdictId: string): ControllerState {
  const learned = state.index.learnedFromVerdict;
  if (!learned || learned.verdictId !== verdictId) return state;
  const machines: Record<string, RosterMachine> = { ...state.machines };
  delete machines[learned.machineId];
  return { ...state, machines };
}

/**
 * What a fault policy decides on. A policy that reads only the facts (`ControllerData`: no index, no
 * open-recovery lookup) is exported, and the full-recompute reference the specs hold the controller to
 * lists it in its own FAULT_POLICIES as it is.
 */
export interface FaultCase<S extends ControllerData = ControllerState> {
  settings: ControllerSettings;
  state: S;
  verdict: MessageOf<'FaultConfirmed'>['data'];
  recovery: { recoveryId: string; verdictId: string; machineId: string };
  now: number;
  decided: (action: RecoveryAction, rule: DecisionRule, evidence?: Evidence) => ControllerDraft;
}

/** A fault policy: the decision it makes, or null when it does not apply. Tried in order; the first that applies decides. */
export type FaultPolicy<S extends ControllerData = ControllerState> = (c: FaultCase<S>) => ControllerDraft[] | null;

/**
 * A machine confirmed faulty while an open recovery's command still waits on it — a member of the
 * trainer group being restarted, or the rollout being promoted into it: that command has failed there
 * (paper Fig. 7) — its agent will never answer, and waiting for the command's timeout keeps the whole
 * group down for nothing. It fails now, as a timeout would make it fail, and the verdict itself is
 * covered by that recovery. Which verdicts fail which command: machine-gone.ts.
 */
const restartWaitsOnFaultyMachine: FaultPolicy = ({ state, verdict, decided, now }) => {
  if (!verdict.machineFaulty) return null;
  const covering = coveringRecovery(state, verdict.machineId, verdict.handledAs);
  const stalled = covering ? waitingOn(covering, verdict) : undefined;
  if (!covering || !stalled) return null;
  const failure = {
    recoveryId: covering.recoveryId,
    commandId: stalled.commandId,
    machineId: verdict.machineId,
    executor: 'controller',
    durationMs: Math.max(0, Math.round(now - stalled.issuedAt)),
    error: `${verdict.machineId} confirmed faulty (${verdict.rule}) while the ${stalled.type === 'PromoteRolloutToTrainer' ? 'promotion' : 'restart'} waited on it`,
  };
  const failed = draft('RecoveryCommandFailed', failure);
  return [
    decided('report-only', 'covered-by-active-recovery', { ...verdict.evidence, detail: `covered by ${covering.recoveryId} (${covering.action})` }),
    failed,
    ...commandFailed(withOutcome(state, covering, failed, now), failure, now),
  ];
};

/** The recovery's pending restart or promotion that still waits on the verdict's machine, and that the verdict fails (machine-gone.ts). */
function waitingOn(r: Recovery, verdict: FaultCase['verdict']) {
  return Object.values(r.commands).find(
    (c) =>
      (c.type === 'RestartTrainerGroup' || c.type === 'PromoteRolloutToTrainer') &&
      c.status === 'pending' &&
      c.awaiting.includes(verdict.machineId) &&
      verdictFailsCommand(verdict, c.type),
  );
}

/**
 * A trainer machine confirmed gone after its restart succeeded but before it reported in (it died in the
 * reconnect stage): no command waits on it any more, so no timeout would ever end that recovery. The
 * machine is replaced now (warm standby or a new machine) and the recovery goes on without it.
 */
const restartedMachineGone: FaultPolicy = ({ state, verdict, decided }) => {
  if (!verdictMeansMachineGone(verdict)) return null;
  const covering = coveringRecovery(state, verdict.machineId, verdict.handledAs);
  const m = verdict.machineId;
  if (!covering || covering.handledAs !== 'trainer' || covering.restartedMachines[m] === undefined || covering.reportedIn[m]) return null;
  const evidence = { ...verdict.evidence, detail: `${m} confirmed gone (${verdict.rule}) after its restart, before it reported in` };
  return [
    decided('report-only', 'covered-by-active-recovery', { ...verdict.evidence, detail: `covered by ${covering.recoveryId} (${covering.action})` }),
    ...faultyTrainerMachine(state, covering, covering.commandSeq + 1, m, evidence),
  ];
};

/**
 * A fault of the departing machine while its group waits for the step's checkpoint (planned-handover.ts):
 * the checkpoint will not come, so the group moves now and the step in progress is retried. Another
 * notice for it changes nothing.
 */
const departingMachineFailed: FaultPolicy = ({ state, verdict, decided, now }) => {
  const covering = coveringRecovery(state, verdict.machineId, verdict.handledAs);
  if (!covering || !awaitingCheckpoint(covering) || covering.machineId !== verdict.machineId) return null;
  if (plannedDeparture(verdict.evidence, verdict.handledAs)) return null;
  const h = covering.handover!;
  return [
    decided('report-only', 'covered-by-active-recovery', { ...verdict.evidence, detail: `covered by ${covering.recoveryId} (${covering.action})` }),
    ...handoverEnded(
      state,
      covering,
      { ...h, status: 'given-up' },
      `${verdict.machineId} failed (${verdict.rule}) before the checkpoint of step ${h.checkpointStep}`,
      now,
      regroup,
    ),
  ];
};

/** A fault on a machine an unfinished recovery already covers (a rank hanging on its dead peer) is recorded, not acted on. */
const coveredByActiveRecovery: FaultPolicy = ({ state, verdict, decided }) => {
  const covering = coveringRecovery(state, verdict.machineId, verdict.handledAs);
  return covering
    ? [decided('report-only', 'covered-by-active-recovery', { ...verdict.evidence, detail: `covered by ${covering.recoveryId} (${covering.action})` })]
    : null;
};

/**
 * A rollout verdict about a machine the controller made a trainer (warm standby, paper §5.1.3): its engine
 * stopped because the promotion stopped it, and its rollout rules no longer apply. While the recovery
 * that lent it is open, coveredByActiveRecovery records it; after, this does.
 */
export const verdictForFormerRole: FaultPolicy<ControllerData> = ({ state, verdict, decided }) => {
  const m = state.machines[verdict.machineId];
  if (verdict.handledAs !== 'rollout' || m?.role !== 'trainer') return null;
  return [
    decided('report-only', 'verdict-for-former-role', {
      ...verdict.evidence,
      detail: `${m.machineId} is a trainer now; ${verdict.evidence.detail ?? verdict.rule}`,
    }),
  ];
};

/**
 * A machine that announced its departure (planned-departures.ts): replaced before it goes, never an
 * escalation — a rollout by a new machine, a trainer by a warm standby or a new machine.
 */
const plannedDepartureOf: FaultPolicy = ({ state, verdict, recovery, now, decided }) => {
  const rule = plannedDeparture(verdict.evidence, verdict.handledAs);
  if (!rule) return null;
  const evidence = departureEvidence(verdict.evidence, now);
  if (verdict.handledAs === 'trainer') {
    const plan = planHandover(state, Date.parse(verdict.evidence.departsAt ?? ''), now);
    const handover = 'wait' in plan ? plan.wait : undefined;
    return faultyTrainerMachine(state, recovery, 1, verdict.machineId, handoverEvidence(evidence, plan), rule, handover);
  }
  const m = state.machines[verdict.machineId] ?? unknownMachine(verdict.machineId, verdict.role);
  return [decided('replace-rollout', rule, evidence), replaceMachine(recovery.recoveryId, 1, m, 'rollout')];
};

/** The baseline policy: every fault restarts the whole task. */
export const taskRestartPolicy: FaultPolicy<ControllerData> = ({ settings, state, recovery, decided }) =>
  settings.policy === 'task-restart'
    ? [decided('restart-task', 'task-restart-policy'), restartTask(state, recovery.recoveryId, 1, 'task-restart-policy')]
    : null;

/**
 * A trainer machine that used its restart budget (machine-restart-budget.ts) is retired as a faulty one
 * is, before rules 1 and 2 are asked: a machine that fails on every restart would otherwise restart the
 * task again and again (each restart opens a first iteration, where every fault escalates).
 */
const trainerRestartBudgetSpent: FaultPolicy = ({ settings, state, verdict, recovery, now }) => {
  if (verdict.handledAs !== 'trainer' || verdict.machineFaulty || stoppedByItsLease(verdict.evidence)) return null;
  const m = state.machines[verdict.machineId];
  if (!m || m.status !== 'active' || (m.role !== 'trainer' && m.role !== 'hybrid')) return null;
  const used = trainerRestartsInWindow(state, settings, m.machineId, now);
  const rule = machineRestartBudgetSpent(used, settings);
  if (!rule) return null;
  const window = `${Math.round(settings.machineRestartWindowMs / 60_000)} min`;
  const detail = `${used} restart(s) of ${m.machineId} for its own faults within ${window} (budget ${settings.machineRestartBudget}); ${verdict.evidence.detail ?? verdict.rule}`;
  return faultyTrainerMachine(state, recovery, 1, m.machineId, { ...verdict.evidence, detail }, rule);
};

/** Paper §5.1.2 rules 1 and 2 (escalation-rules.ts): the whole task restarts. */
export const escalation: FaultPolicy<ControllerData> = ({ state, verdict, recovery, decided }) => {
  const rule = firstIterationFault(state) ?? repeatedFaultInStep(state, verdict.handledAs);
  return rule ? [decided('restart-task', rule), restartTask(state, recovery.recoveryId, 1, rule)] : null;
};

/**
 * A rollout's engine process failed with no hardware evidence (it exited or raised): restart it in place,
 * unless the machine used its in-place restarts within the window — then it is replaced, and the decision
 * says why.
 */
export const rolloutProcessFault: FaultPolicy<ControllerData> = ({ settings, state, verdict, recovery, now, decided }) => {
  if (verdict.handledAs !== 'rollout' || verdict.machineFaulty || settings.engineRestartBudget <= 0) return null;
  const m = state.machines[verdict.machineId];
  // A machine the controller knows only from the verdict has no agent it could address.
  if (!m || m.status !== 'active' || m.role !== 'rollout') return null;
  const used = engineRestartsInWindow(state, settings, m.machineId, now);
  const spent = engineRestartBudgetSpent(used, settings);
  if (spent) {
    const window = `${Math.round(settings.engineRestartWindowMs / 60_000)} min`;
    const detail = `${used} in-place engine restart(s) of ${m.machineId} within ${window} (budget ${settings.engineRestartBudget}); ${verdict.evidence.detail ?? verdict.rule}`;
    return [decided('replace-rollout', spent, { ...verdict.evidence, detail }), replaceMachine(recovery.recoveryId, 1, m, 'rollout')];
  }
  return [decided('restart-rollout-engine', 'rollout-process-fault'), restartRolloutEngine(recovery.recoveryId, 1, m, used + 1, settings.engineRestartBudget)];
};

/** A rollout fault: isolate the machine and bring a new one; the job never restarts for a rollout. */
export const rolloutFault: FaultPolicy<ControllerData> = ({ state, verdict, recovery, decided }) => {
  if (verdict.handledAs !== 'rollout') return null;
  const m = state.machines[verdict.machineId] ?? unknownMachine(verdict.machineId, verdict.role);
  return [decided('replace-rollout', 'rollout-fault'), replaceMachine(recovery.recoveryId, 1, m, 'rollout')];
};

/** Hardware evidence on a trainer machine: it must go (warm standby or a new machine). */
const trainerMachineFaulty: FaultPolicy = ({ state, verdict, recovery }) =>
  verdict.machineFaulty ? faultyTrainerMachine(state, recovery, 1, verdict.machineId, verdict.evidence) : null;

/** Any other trainer fault: restart only the trainer group, in place. */
export const trainerFault: FaultPolicy<ControllerData> = ({ state, recovery, decided }) => [
  decided('restart-trainer-group', 'trainer-fault'),
  restartTrainerGroup(state, recovery.recoveryId, 1, trainerGroup(state)),
];

export const FAULT_POLICIES: readonly FaultPolicy[] = [
  restartWaitsOnFaultyMachine,
  restartedMachineGone,
  departingMachineFailed,
  coveredByActiveRecovery,
  verdictForFormerRole,
  taskRestartPolicy,
  plannedDepartureOf,
  trainerRestartBudgetSpent,
  escalation,
  rolloutProcessFault,
  rolloutFault,
  trainerMachineFaulty,
  trainerFault,
];

/** The first of `policies` that applies decides on the fault (the full-recompute reference passes its own list). */
export function decideOnFault<S extends ControllerData>(
  policies: readonly FaultPolicy<S>[],
  settings: ControllerSettings,
  state: S,
  fault: MessageOf<'FaultConfirmed'>,
  now: number,
): ControllerDraft[] {
  const verdict = fault.data;
  if (state.decidedVerdicts[verdict.verdictId]) return [];
  const recovery = { recoveryId: `${verdict.verdictId}/recovery`, verdictId: verdict.verdictId, machineId: verdict.machineId };
  const c: FaultCase<S> = {
    settings,
    state,
    verdict,
    recovery,
    now,
    decided: (action, rule, evidence = verdict.evidence) => decision(state, recovery, action, rule, evidence),
  };
  for (const policy of policies) {
    const decided = policy(c);
    if (decided) return decided;
  }
  return [];
}

// ── command outcomes ─────────────────────────────────────────────────────────────────────────

function commandSucceeded(state: ControllerState, commandId: string, now: number): ControllerDraft[] {
  const recovery = ownerOf(state, commandId);
  if (!recovery || recovery.done) return [];
  const cmd = recovery.commands[commandId];
  if (cmd.status !== 'succeeded') return []; // other machines of the group still owe an answer
  const next = recovery.commandSeq + 1;
  switch (cmd.type) {
    case 'PromoteRolloutToTrainer':
      // A departing trainer's group moves at its step's checkpoint, and takes its machine out then (planned-handover.ts).
      if (recovery.handover) return awaitingCheckpoint(recovery) ? [] : moveFromDepartingMachine(state, recovery, now, regroup);
      return restartGroupOf(state, recovery, next, now);
    case 'ReplaceMachine':
      if (cmd.background) return [];
      if (recovery.handledAs === 'trainer') return restartGroupOf(state, recovery, next, now, cmd.newMachineId);
      return reportedInFully(recovery) ? [completed(recovery, now, 'recovered')] : [];
    case 'RestartTrainerGroup':
    case 'RestartRolloutEngine':
      return reportedInFully(recovery) ? [completed(recovery, now, 'recovered')] : [];
    case 'RestartTask':
      return [completed(recovery, now, 'escalated')];
    default:
      return assertNever(cmd.type, 'command type');
  }
}

type CommandFailure = MessageOf<'RecoveryCommandFailed'>['data'];

function commandFailed(state: ControllerState, failure: CommandFailure, now: number): ControllerDraft[] {
  const recovery = ownerOf(state, failure.commandId);
  return !recovery || recovery.done ? [] : failedIn(state, recovery, failure, now);
}

/** A command of `recovery` failed (its outcome already folded into `recovery`): the recovery's next step. */
function failedIn(state: ControllerState, recovery: Recovery, failure: CommandFailure, now: number): ControllerDraft[] {
  const cmd = recovery.commands[failure.commandId];
  const next = recovery.commandSeq + 1;
  const evidence: Evidence = { detail: `${cmd.type} ${failure.commandId} failed${failure.machineId ? ` on ${failure.machineId}` : ''}: ${failure.error}` };
  const decided = (action: RecoveryAction, rule: DecisionRule) => decision(state, recovery, action, rule, evidence);

  if (cmd.type === 'RestartTask') return [completed(recovery, now, 'abandoned')];
  if (cmd.background) return []; // the pool refill failed: fewer rollouts, the job goes on
  if (cmd.type === 'RestartRolloutEngine') {
    // The engine did not come back in place (or its agent did not answer): the machine goes.
    const m = state.machines[recovery.machineId];
    return m
      ? [decided('replace-rollout', 'rollout-engine-restart-failed'), replaceMachine(recovery.recoveryId, next, m, 'rollout')]
      : [completed(recovery, now, 'abandoned')];
  }
  const escalated = restartFailedTwice(recovery);
  if (escalated) return [decided('restart-task', escalated), restartTask(state, recovery.recoveryId, next, escalated)];

  if (recovery.handledAs === 'rollout') {
    // One replacement may fail and is asked for again; a failed in-place engine restart before it does not count.
    const failedReplacements = Object.values(recovery.commands).filter((c) => c.type === 'ReplaceMachine' && c.status === 'failed').length;
    if (failedReplacements >= 2) return [completed(recovery, now, 'abandoned')];
    const m = state.machines[recovery.machineId];
    return m ? [decided('replace-rollout', 'rollout-fault'), replaceMachine(recovery.recoveryId, next, m, 'rollout')] : [completed(recovery, now, 'abandoned')];
  }
  // First failed trainer restart: if it failed on a machine, that machine is faulty (paper Fig. 7).
  const suspect = cmd.type === 'RestartTrainerGroup' ? failure.machineId : null;
  if (suspect) return faultyTrainerMachine(state, recovery, next, suspect, evidence);
  if (cmd.type === 'PromoteRolloutToTrainer') {
    // The machine the standby was to replace (not always the recovery's own: a re-plan replaces another).
    const faulty = state.machines[cmd.replaces ?? recovery.machineId];
    return faulty ? [decided('request-new-trainer-machine', 'trainer-machine-faulty'), replaceMachine(recovery.recoveryId, next, faulty, faulty.role)] : [];
  }
  return [decided(recovery.action, recovery.rule), ...restartGroupOf(state, recovery, next, now)];
}

/**
 * The trainer restart of a recovery under way — unless a member was confirmed faulty meanwhile (a second
 * machine of a rack lost while the first is replaced, its verdict covered by this recovery): then the
 * restart fails on that machine at once, as it would after the command timeout, and the recovery plans
 * again around it (rule 3 counts it as the failed restart it is).
 */
function restartGroupOf(state: ControllerState, recovery: Recovery, seq: number, now: number, add: string | null = null): ControllerDraft[] {
  const restart = restartTrainerGroupOf(state, recovery, seq, add);
  const dead = restart.data.machines.find((id) => state.faultyMachines?.[id] !== undefined);
  if (dead === undefined) return [restart];
  const failure = {
    recoveryId: recovery.recoveryId,
    commandId: restart.data.commandId,
    machineId: dead,
    executor: 'controller',
    durationMs: 0,
    error: `${dead} was confirmed faulty before the restart was issued`,
  };
  const failed = draft('RecoveryCommandFailed', failure);
  const issued: Recovery = {
    ...recovery,
    commands: {
      ...recovery.commands,
      [failure.commandId]: {
        commandId: failure.commandId,
        type: 'RestartTrainerGroup',
        issuedAt: now,
        awaiting: restart.data.machines,
        status: 'pending',
        background: false,
        subject: null,
        newMachineId: null,
      },
    },
    commandSeq: Math.max(recovery.commandSeq, seq),
    trainerGroup: restart.data.machines,
    restartedMachines: { ...recovery.restartedMachines },
    reportedIn: { ...recovery.reportedIn },
  };
  applyOutcome(state, issued, failed, now);
  // The view after the restart was issued: its epoch is taken, so a task restart after it fences it too.
  const view = { ...state, trainerEpoch: restart.data.trainerEpoch, recoveries: { ...state.recoveries, [issued.recoveryId]: issued } };
  return [restart, failed, ...failedIn(view, issued, failure, now)];
}

/** restartGroupOf as the handover moves a group (planned-handover.ts). */
const regroup = (state: ControllerState, r: Recovery, seq: number, now: number) => restartGroupOf(state, r, seq, now);

/** A command unanswered past the timeout has failed (a dead agent cannot say so itself); one per tick, so each decision sees the last. */
function timedOutCommands(settings: ControllerSettings, state: ControllerState, now: number): ControllerDraft[] {
  for (const id of state.index.open) {
    const recovery = state.recoveries[id];
    for (const cmd of Object.values(recovery.commands)) {
      if (cmd.status !== 'pending' || now - cmd.issuedAt < settings.commandTimeoutMs) continue;
      const failure = {
        recoveryId: recovery.recoveryId,
        commandId: cmd.commandId,
        machineId: cmd.awaiting[0] ?? null,
        executor: 'controller',
        durationMs: Math.round(now - cmd.issuedAt),
        error: `no answer from ${cmd.awaiting.length ? cmd.awaiting.join(', ') : 'the executor'} within ${Math.round(settings.commandTimeoutMs / 1000)} s`,
      };
      const failed = draft('RecoveryCommandFailed', failure);
      return [failed, ...commandFailed(withOutcome(state, recovery, failed, now), failure, now)];
    }
  }
  return [];
}

/** Reconnect stage: the recovery ends when every restarted machine has reported back. */
function lifeSign(state: ControllerState, machineId: string, now: number): ControllerDraft[] {
  const out: ControllerDraft[] = [];
  for (const id of state.index.open) {
    const r = state.recoveries[id];
    if (r.reportedIn[machineId] && reportedInFully(r)) out.push(completed(r, now, 'recovered'));
  }
  return out;
}
