/**
 * The controller's decisions (paper Figure 7) as the full recomputation makes them (see
 * controller.state.ts): the same steps as the live controller.decide.ts, each on a state of its own.
 * Outcomes and life signs are decided on a copy with the message folded in (this folder's evolve), a
 * fault on the state before it; where a decision must see an output of its own (a command failed on the
 * controller's say), it folds that output into a copy too. Open recoveries are found by walking every
 * recovery (no index).
 *
 * The fault policies that read only the facts, how the first that applies decides (`decideOnFault`),
 * the commands and escalation rules, the warm-standby choice and a departing trainer's move are the live
 * ones. Kept here: the policies and steps that look up open recoveries or fold outputs, and the list of
 * policies in the live order (a policy added there is added here, as its own copy when it looks up open
 * recoveries).
 */
import { DecisionRule, draft, Evidence, MessageOf, RecoveryAction } from '@robustrl/contracts';
import { assertNever } from '@robustrl/domain-kit';
import {
  decideOnFault,
  escalation,
  FaultPolicy,
  rolloutFault,
  rolloutProcessFault,
  taskRestartPolicy,
  trainerFault,
  verdictForFormerRole,
} from '../../src/controller.decide';
import { restartFailedTwice } from '../../src/escalation-rules';
import { machineRestartBudgetSpent, stoppedByItsLease, trainerRestartsInWindow } from '../../src/machine-restart-budget';
import { verdictFailsCommand, verdictMeansMachineGone } from '../../src/machine-gone';
import { departureEvidence, plannedDeparture } from '../../src/planned-departures';
import { handoverEvidence, handoverRecord, HandoverState, moveFromDepartingMachine, planHandover } from '../../src/planned-handover';
import { completed, decision, promoteRollout, replaceMachine, restartTask, restartTrainerGroupOf } from '../../src/recovery-commands';
import { warmStandbyAmong } from '../../src/warm-standby';
import { evolveController } from './controller.evolve';
import {
  ControllerCommand,
  ControllerDraft,
  ControllerSettings,
  ControllerState,
  ownerOf,
  Recovery,
  reportedInFully,
  unknownMachine,
} from './controller.state';

export function decideController(settings: ControllerSettings) {
  return (command: ControllerCommand, state: ControllerState): ControllerDraft[] => {
    if (command.kind === 'tick') return handoverPastDeadline(state, command.now) ?? timedOutCommands(settings, state, command.now);
    const { message, now } = command;
    const folded = () => evolveController(state, message, Date.parse(message.occurredAt), now);
    switch (message.type) {
      case 'FaultConfirmed':
        return decideOnFault(FAULT_POLICIES, settings, state, message, now);
      case 'RecoveryCommandSucceeded':
        return commandSucceeded(folded(), message.data.commandId, now);
      case 'RecoveryCommandFailed':
        return commandFailed(folded(), message.data, now);
      case 'RolePhaseChanged':
      case 'MachineRegistered':
        return lifeSign(folded(), message.data.machineId, now);
      case 'CheckpointSaved':
        return checkpointForHandover(folded(), message.data.step, now);
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

type Policy = FaultPolicy<ControllerState>;

/**
 * A trainer machine confirmed faulty while an open recovery's trainer restart still waits on it: that
 * restart has failed there (paper Fig. 7) — its agent will never answer, and waiting for the command's
 * timeout keeps the whole group down for nothing. It fails now, as a timeout would make it fail, and the
 * verdict itself is covered by that recovery. Only a trainer verdict: a rollout lent as standby goes quiet
 * as a rollout by design (verdictForFormerRole).
 */
const restartWaitsOnFaultyMachine: Policy = ({ state, verdict, decided, now }) => {
  if (!verdict.machineFaulty) return null;
  const covering = coveringRecovery(state, verdict.machineId, verdict.handledAs);
  const stalled = covering
    ? Object.values(covering.commands).find(
        (c) =>
          (c.type === 'RestartTrainerGroup' || c.type === 'PromoteRolloutToTrainer') &&
          c.status === 'pending' &&
          c.awaiting.includes(verdict.machineId) &&
          verdictFailsCommand(verdict, c.type),
      )
    : undefined;
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
    ...commandFailed(evolveController(state, failed, now), failure, now),
  ];
};

/**
 * A trainer machine confirmed gone after its restart succeeded but before it reported in (it died in the
 * reconnect stage): no command waits on it any more, so no timeout would ever end that recovery. The
 * machine is replaced now (warm standby or a new machine) and the recovery goes on without it.
 */
const restartedMachineGone: Policy = ({ state, verdict, decided }) => {
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

/** A fault of the departing machine while its group waits for the step's checkpoint: the group moves now. */
const departingMachineFailed: Policy = ({ state, verdict, decided, now }) => {
  const covering = coveringRecovery(state, verdict.machineId, verdict.handledAs);
  if (!covering || covering.handover?.status !== 'waiting' || covering.machineId !== verdict.machineId) return null;
  if (plannedDeparture(verdict.evidence, verdict.handledAs)) return null;
  const h = covering.handover;
  return [
    decided('report-only', 'covered-by-active-recovery', { ...verdict.evidence, detail: `covered by ${covering.recoveryId} (${covering.action})` }),
    ...handoverEnded(
      state,
      covering,
      { ...h, status: 'given-up' },
      `${verdict.machineId} failed (${verdict.rule}) before the checkpoint of step ${h.checkpointStep}`,
      now,
    ),
  ];
};

/** A fault on a machine an unfinished recovery already covers (a rank hanging on its dead peer) is recorded, not acted on. */
const coveredByActiveRecovery: Policy = ({ state, verdict, decided }) => {
  const covering = coveringRecovery(state, verdict.machineId, verdict.handledAs);
  return covering
    ? [decided('report-only', 'covered-by-active-recovery', { ...verdict.evidence, detail: `covered by ${covering.recoveryId} (${covering.action})` })]
    : null;
};

/**
 * A machine that announced its departure (planned-departures.ts): replaced before it goes, never an
 * escalation — a rollout by a new machine, a trainer by a warm standby or a new machine.
 */
const plannedDepartureOf: Policy = ({ state, verdict, recovery, now, decided }) => {
  const rule = plannedDeparture(verdict.evidence, verdict.handledAs);
  if (!rule) return null;
  const evidence = departureEvidence(verdict.evidence, now);
  if (verdict.handledAs === 'trainer') {
    const plan = planHandover(state, Date.parse(verdict.evidence.departsAt ?? ''), now);
    return faultyTrainerMachine(state, recovery, 1, verdict.machineId, handoverEvidence(evidence, plan), rule, 'wait' in plan ? plan.wait : undefined);
  }
  const m = state.machines[verdict.machineId] ?? unknownMachine(verdict.machineId, verdict.role);
  return [decided('replace-rollout', rule, evidence), replaceMachine(recovery.recoveryId, 1, m, 'rollout')];
};

const trainerRestartBudgetSpent: Policy = ({ settings, state, verdict, recovery, now }) => {
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

/** Hardware evidence on a trainer machine: it must go (warm standby or a new machine). */
const trainerMachineFaulty: Policy = ({ state, verdict, recovery }) =>
  verdict.machineFaulty ? faultyTrainerMachine(state, recovery, 1, verdict.machineId, verdict.evidence) : null;

/** The live FAULT_POLICIES in their order: those that look up open recoveries (or the machines they hold) are this folder's own. */
export const FAULT_POLICIES: readonly Policy[] = [
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

/**
 * A trainer machine that must go (hardware evidence, unreachable, or a failed restart there):
 * semi-sync/async borrow a rollout as warm standby and refill the rollout pool; sync mode, or no
 * suitable rollout, asks for a new machine (paper §5.1.3).
 */
function faultyTrainerMachine(
  state: ControllerState,
  recovery: { recoveryId: string; verdictId: string; machineId: string },
  seq: number,
  machineId: string,
  evidence: Evidence,
  rule: DecisionRule = 'trainer-machine-faulty',
  handover?: HandoverState,
): ControllerDraft[] {
  const faulty = state.machines[machineId] ?? unknownMachine(machineId, 'trainer');
  const standby = state.mode !== 'sync' ? warmStandbyAmong(state, faulty, machinesInActiveRecoveries(state)) : null;
  const record = handover && handoverRecord(handover);
  if (standby) {
    const lent = [decision(state, recovery, 'warm-standby-from-rollout', rule, evidence, record), promoteRollout(recovery.recoveryId, seq, standby, machineId)];
    return handover ? lent : [...lent, replaceMachine(recovery.recoveryId, seq + 1, faulty, 'rollout')];
  }
  const decided = decision(state, recovery, 'request-new-trainer-machine', rule, evidence, record);
  return handover ? [decided] : [decided, replaceMachine(recovery.recoveryId, seq, faulty, faulty.role)];
}

/** Every machine an unfinished recovery is about or is rebuilding the trainer group with (never lent): every recovery walked. */
function machinesInActiveRecoveries(state: ControllerState): Set<string> {
  const busy = new Set<string>();
  for (const r of Object.values(state.recoveries)) {
    if (r.done) continue;
    busy.add(r.machineId);
    for (const m of r.trainerGroup) busy.add(m);
  }
  return busy;
}

// ── a departing trainer's handover (../../planned-handover.ts) ────────────────────────────────

function checkpointForHandover(state: ControllerState, step: number, now: number): ControllerDraft[] {
  const r = Object.values(state.recoveries).find((x) => !x.done && x.handover?.status === 'waiting' && step >= x.handover.checkpointStep);
  if (!r) return [];
  return handoverEnded(
    state,
    r,
    { ...r.handover!, checkpointStep: step, status: 'saved' },
    `the checkpoint of step ${step} is saved: the trainer group moves to step ${step + 1}, no step retried`,
    now,
  );
}

function handoverPastDeadline(state: ControllerState, now: number): ControllerDraft[] | null {
  const r = Object.values(state.recoveries).find((x) => !x.done && x.handover?.status === 'waiting' && now >= x.handover.by);
  if (!r) return null;
  const h = r.handover!;
  const why = `no checkpoint of step ${h.checkpointStep} by the handover deadline (${new Date(h.by).toISOString()}): the group moves now, step ${r.step} is retried`;
  return handoverEnded(state, r, { ...h, status: 'given-up' }, why, now);
}

function handoverEnded(state: ControllerState, r: Recovery, h: HandoverState, detail: string, now: number): ControllerDraft[] {
  const decided = decision(state, r, r.action, r.rule, { signal: 'node-draining', detail }, handoverRecord(h));
  const after = evolveController(state, decided, now);
  return [decided, ...moveFromDepartingMachine(after, after.recoveries[r.recoveryId], now, regroup)];
}

/** An unfinished recovery that already covers this fault: the same machine, or the trainer group it is restarting. */
function coveringRecovery(state: ControllerState, machineId: string, handledAs: 'trainer' | 'rollout'): Recovery | undefined {
  return Object.values(state.recoveries).find(
    (r) =>
      !r.done &&
      r.action !== 'report-only' &&
      (r.action === 'restart-task' ||
        r.machineId === machineId ||
        (r.handledAs === 'trainer' && (handledAs === 'trainer' || r.trainerGroup.includes(machineId)))),
  );
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
      if (recovery.handover) return recovery.handover.status === 'waiting' ? [] : moveFromDepartingMachine(state, recovery, now, regroup);
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

function commandFailed(state: ControllerState, failure: MessageOf<'RecoveryCommandFailed'>['data'], now: number): ControllerDraft[] {
  const recovery = ownerOf(state, failure.commandId);
  if (!recovery || recovery.done) return [];
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

/** The trainer restart of a recovery under way, failing at once on a member confirmed faulty meanwhile. */
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
  return [restart, failed, ...commandFailed(evolveController(evolveController(state, restart, now), failed, now), failure, now)];
}

/** restartGroupOf as a departing trainer's group moves (moveFromDepartingMachine). */
const regroup = (state: ControllerState, r: Recovery, seq: number, now: number) => restartGroupOf(state, r, seq, now);

/** A command unanswered past the timeout has failed (a dead agent cannot say so itself); one per tick, so each decision sees the last. */
function timedOutCommands(settings: ControllerSettings, state: ControllerState, now: number): ControllerDraft[] {
  for (const recovery of Object.values(state.recoveries)) {
    if (recovery.done) continue;
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
      return [failed, ...commandFailed(evolveController(state, failed, now), failure, now)];
    }
  }
  return [];
}

/** Reconnect stage: the recovery ends when every restarted machine has reported back. */
function lifeSign(state: ControllerState, machineId: string, now: number): ControllerDraft[] {
  const out: ControllerDraft[] = [];
  for (const r of Object.values(state.recoveries)) {
    if (!r.done && r.reportedIn[machineId] && reportedInFully(r)) out.push(completed(r, now, 'recovered'));
  }
  return out;
}
