/**
 * The copying fold of the full-recompute controller (see controller.state.ts): every fact a new state,
 * the roster and the recovery table copied where they change, and no index to keep.
 */
import type { Draft } from '@robustrl/contracts';
import { assertNever } from '@robustrl/domain-kit';
import { verdictMeansMachineGone } from '../../src/machine-gone';
import { restartsItsMachine, withTrainerRestart } from '../../src/machine-restart-budget';
import {
  batchOfStep,
  ControllerFact,
  ControllerState,
  IssuedCommand,
  overtaken,
  ownerOf,
  Recovery,
  RosterMachine,
  trainerGroup,
  unknownMachine,
} from './controller.state';
import { OpenSuspicions, settle, suspect } from '../../src/open-suspicions';
import { afterHandover, handoverOf } from '../../src/planned-handover';

/**
 * Folds one fact into the controller state at `at`: the event's own time, or `now` for an output the
 * controller just decided (decide folds its outputs before deciding further, e.g. a command that timed
 * out before the failure it leads to).
 */
export function evolveController(state: ControllerState, fact: ControllerFact, at: number, heardAt = at): ControllerState {
  switch (fact.type) {
    case 'JobStarted':
      // Read after a step it precedes (another topic, replayed): the job is past its first iteration.
      if (overtaken(state, at)) return { ...state, mode: fact.data.mode };
      return {
        ...state,
        mode: fact.data.mode,
        firstIteration: true,
        step: fact.data.resumedFromStep === null ? 0 : fact.data.resumedFromStep + 1,
        lastCheckpointStep: fact.data.resumedFromStep ?? state.lastCheckpointStep,
        trainerFaultsInStep: { step: -1, count: 0 },
      };
    case 'MachineRegistered': {
      const d = fact.data;
      const prior = state.machines[d.machineId];
      // A registration overtaken by the machine's verdict (another topic) keeps the status it has since.
      const status = prior && prior.status !== 'active' ? prior.status : 'active';
      const registered = withMachine(state, {
        machineId: d.machineId,
        role: d.role,
        zone: d.zone,
        hardwareClass: d.hardwareClass,
        status,
        inFlightRequests: prior?.inFlightRequests ?? 0,
        incarnation: d.incarnation ?? null,
        agentAddress: d.agentAddress,
        hostAddress: d.hostAddress ?? null,
      });
      // A new incarnation: what was suspected of the old one is not known of it.
      const unsuspected = withSuspicions(registered, settle(state.suspicions, d.machineId));
      // Registered again after it was confirmed faulty: an agent answers there now.
      const faultyAt = state.faultyMachines?.[d.machineId];
      if (faultyAt === undefined || at <= faultyAt) return lifeSign(unsuspected, d.machineId, heardAt);
      const { [d.machineId]: _alive, ...faultyMachines } = state.faultyMachines!;
      return lifeSign({ ...unsuspected, faultyMachines }, d.machineId, heardAt);
    }
    case 'MachineRoleChanged': {
      const m = state.machines[fact.data.machineId];
      return m ? withMachine(state, { ...m, role: fact.data.to }) : state;
    }
    case 'MachineDeregistered': {
      const m = state.machines[fact.data.machineId];
      return m ? withMachine(state, { ...m, status: 'gone' }) : state;
    }
    case 'RolloutThroughputSampled': {
      const m = state.machines[fact.data.machineId];
      // Most samples repeat the count: copying the roster (O(machines)) for them made telemetry quadratic.
      if (!m || m.inFlightRequests === fact.data.inFlightRequests) return state;
      return withMachine(state, { ...m, inFlightRequests: fact.data.inFlightRequests });
    }
    case 'TrainingStepStarted':
      return { ...state, step: fact.data.step, stepBatch: { step: fact.data.step, batchId: fact.data.batchId }, stepStartedAt: at };
    case 'TrainingStepCompleted':
      return {
        ...state,
        firstIteration: false,
        lastStepMs: fact.data.durationMs,
        step: Math.max(state.step, fact.data.step + 1),
        lastStepCompletedAt: Math.max(state.lastStepCompletedAt ?? at, at),
      };
    case 'CheckpointSaved':
      return { ...state, lastCheckpointStep: Math.max(state.lastCheckpointStep ?? -1, fact.data.step), lastCheckpointBlockingMs: fact.data.blockingMs };
    case 'RolePhaseChanged':
      return lifeSign(state, fact.data.machineId, heardAt);
    case 'FaultConfirmed': {
      // A verdict may overtake the machine's registration (another topic): know the machine from it.
      const known = state.machines[fact.data.machineId] ? state : withMachine(state, unknownMachine(fact.data.machineId, fact.data.role));
      const faults = { ...state.faults, [fact.data.verdictId]: { at, detectMs: fact.data.detectionLatencyMs, handledAs: fact.data.handledAs } };
      const faultyMachines = verdictMeansMachineGone(fact.data) ? { ...state.faultyMachines, [fact.data.machineId]: at } : state.faultyMachines;
      return withSuspicions({ ...known, faults, ...(faultyMachines ? { faultyMachines } : {}) }, settle(state.suspicions, fact.data.machineId, fact.data.rule));
    }
    case 'FaultSuspected':
      return withSuspicions(state, suspect(state.suspicions, fact.data.machineId, fact.data.rule));
    case 'SuspicionCleared':
      return withSuspicions(state, settle(state.suspicions, fact.data.machineId, fact.data.rule));
    case 'RecoveryDecided':
      return onDecided(state, fact, at);
    case 'RestartTrainerGroup':
    case 'PromoteRolloutToTrainer':
    case 'ReplaceMachine':
    case 'RestartRolloutEngine':
    case 'RestartTask':
      return onIssued(
        (fact.type === 'RestartTrainerGroup' || fact.type === 'RestartTask') && fact.data.trainerEpoch !== undefined
          ? { ...state, trainerEpoch: Math.max(state.trainerEpoch ?? 0, fact.data.trainerEpoch) }
          : state,
        fact,
        at,
      );
    case 'RecoveryCommandSucceeded':
    case 'RecoveryCommandFailed':
      return onOutcome(state, fact, heardAt);
    case 'RecoveryCompleted': {
      const r = state.recoveries[fact.data.recoveryId];
      return r ? withRecovery(state, { ...r, done: true }) : state;
    }
    default:
      return assertNever(fact, 'controller event');
  }
}

export function withMachine(state: ControllerState, m: RosterMachine): ControllerState {
  return { ...state, machines: { ...state.machines, [m.machineId]: m } };
}

export function withRecovery(state: ControllerState, r: Recovery): ControllerState {
  return { ...state, recoveries: { ...state.recoveries, [r.recoveryId]: r } };
}

function onDecided(state: ControllerState, fact: Draft<'RecoveryDecided'>, at: number): ControllerState {
  const d = fact.data;
  const existing = state.recoveries[d.recoveryId];
  const decidedVerdicts = { ...state.decidedVerdicts, [d.verdictId]: d.recoveryId };
  if (existing) {
    const decided = { ...existing, action: d.action, rule: d.rule };
    return withRecovery({ ...state, decidedVerdicts }, d.handover ? afterHandover(state, decided, handoverOf(d.handover)) : decided);
  }
  const acted = d.action !== 'report-only';
  const fault = state.faults[d.verdictId];
  const recovery: Recovery = {
    recoveryId: d.recoveryId,
    verdictId: d.verdictId,
    machineId: d.machineId,
    handledAs: fault?.handledAs ?? (d.action === 'replace-rollout' || d.action === 'restart-rollout-engine' ? 'rollout' : 'trainer'),
    action: d.action,
    rule: d.rule,
    faultAt: fault?.at ?? at,
    decidedAt: at,
    detectMs: fault?.detectMs ?? 0,
    commands: {},
    commandSeq: 0,
    failures: 0,
    trainerGroup:
      d.action === 'restart-trainer-group' || d.action === 'warm-standby-from-rollout' || d.action === 'request-new-trainer-machine' ? trainerGroup(state) : [],
    step: state.step,
    checkpointStep: state.lastCheckpointStep,
    batchId: batchOfStep(state, state.step),
    restartedAt: null,
    restartedMachines: {},
    reportedIn: {},
    done: !acted,
    ...(d.handover ? { handover: handoverOf(d.handover) } : {}),
  };
  const countsAsTrainerFault = acted && recovery.handledAs === 'trainer' && d.action !== 'restart-task';
  const trainerFaultsInStep = countsAsTrainerFault
    ? { step: state.step, count: state.trainerFaultsInStep.step === state.step ? state.trainerFaultsInStep.count + 1 : 1 }
    : state.trainerFaultsInStep;
  const restartsMachine = acted && recovery.handledAs === 'trainer' && restartsItsMachine(d);
  const trainerRestarts = restartsMachine ? withTrainerRestart(state.trainerRestarts, d.machineId, at) : state.trainerRestarts;
  return withRecovery({ ...state, decidedVerdicts, trainerFaultsInStep, ...(trainerRestarts ? { trainerRestarts } : {}) }, recovery);
}

function onIssued(
  state: ControllerState,
  fact: Draft<'RestartTrainerGroup' | 'PromoteRolloutToTrainer' | 'ReplaceMachine' | 'RestartRolloutEngine' | 'RestartTask'>,
  at: number,
): ControllerState {
  const r = state.recoveries[fact.data.recoveryId];
  if (!r) return state;
  const seq = Number(fact.data.commandId.slice(fact.data.commandId.lastIndexOf('/') + 1)) || r.commandSeq + 1;
  let machines = state.machines;
  let trainerGroupNow = r.trainerGroup;
  let awaiting: string[] = [];
  let subject: string | null = null;
  let background = false;
  let restartedMachines = r.restartedMachines;
  /** A machine a trainer recovery takes out of its group: it owes no report, and the restart stage starts again. */
  let leaving: string | null = null;
  let engineRestarts = state.engineRestarts;
  switch (fact.type) {
    case 'RestartTrainerGroup':
      awaiting = [...fact.data.machines];
      trainerGroupNow = [...fact.data.machines];
      break;
    case 'PromoteRolloutToTrainer':
      subject = fact.data.rolloutMachineId;
      awaiting = [fact.data.rolloutMachineId];
      trainerGroupNow = [...r.trainerGroup.filter((m) => m !== fact.data.replacesMachineId), fact.data.rolloutMachineId];
      leaving = fact.data.replacesMachineId;
      break;
    case 'ReplaceMachine': {
      subject = fact.data.machineId;
      const m = machines[fact.data.machineId];
      if (m) machines = { ...machines, [m.machineId]: { ...m, status: 'isolated' } };
      trainerGroupNow = r.trainerGroup.filter((id) => id !== fact.data.machineId);
      if (r.handledAs === 'trainer') leaving = fact.data.machineId;
      // A rollout refilling the pool after a warm standby does not hold up the trainer's recovery.
      background = r.handledAs === 'trainer' && fact.data.role === 'rollout';
      break;
    }
    case 'RestartRolloutEngine': {
      subject = fact.data.machineId;
      awaiting = [fact.data.machineId];
      restartedMachines = { [fact.data.machineId]: at };
      engineRestarts = { ...engineRestarts, [fact.data.machineId]: [...(engineRestarts?.[fact.data.machineId] ?? []), at] };
      break;
    }
    case 'RestartTask':
      break;
  }
  const cmd: IssuedCommand = {
    commandId: fact.data.commandId,
    type: fact.type,
    issuedAt: at,
    awaiting,
    status: 'pending',
    background,
    subject,
    newMachineId: null,
    ...(fact.type === 'PromoteRolloutToTrainer' ? { replaces: fact.data.replacesMachineId } : {}),
  };
  return withRecovery(
    { ...state, machines, ...(engineRestarts ? { engineRestarts } : {}), commandOwner: { ...state.commandOwner, [cmd.commandId]: r.recoveryId } },
    {
      ...r,
      commandSeq: Math.max(r.commandSeq, seq),
      trainerGroup: trainerGroupNow,
      restartedMachines: leaving === null ? restartedMachines : Object.fromEntries(Object.entries(restartedMachines).filter(([id]) => id !== leaving)),
      ...(leaving === null ? {} : { restartedAt: null }),
      commands: { ...r.commands, [cmd.commandId]: cmd },
    },
  );
}

function onOutcome(state: ControllerState, fact: Draft<'RecoveryCommandSucceeded' | 'RecoveryCommandFailed'>, at: number): ControllerState {
  const r = ownerOf(state, fact.data.commandId);
  if (!r) return state;
  const cmd = r.commands[fact.data.commandId];
  if (!cmd || cmd.status !== 'pending') return state;
  if (fact.type === 'RecoveryCommandFailed') {
    // A failed pool refill is not a failed restart (rule 3 counts restarts); a standby that could
    // not be promoted is not part of the trainer group.
    const failures = cmd.background ? r.failures : r.failures + 1;
    const group = cmd.type === 'PromoteRolloutToTrainer' ? r.trainerGroup.filter((m) => m !== cmd.subject) : r.trainerGroup;
    return withRecovery(state, { ...r, failures, trainerGroup: group, commands: { ...r.commands, [cmd.commandId]: { ...cmd, status: 'failed' } } });
  }
  const machineId = fact.data.machineId;
  const awaiting = machineId === null ? [] : cmd.awaiting.filter((m) => m !== machineId);
  const finished = awaiting.length === 0;
  const newMachineId = fact.data.newMachineId ?? cmd.newMachineId;
  let recovery: Recovery = {
    ...r,
    commands: { ...r.commands, [cmd.commandId]: { ...cmd, awaiting, status: finished ? 'succeeded' : 'pending', newMachineId } },
  };
  if (cmd.type === 'RestartTrainerGroup') {
    // Each machine must report in after its own restart: a phase from the process being replaced does not count.
    const restarted = machineId === null ? Object.fromEntries(cmd.awaiting.map((m) => [m, at])) : { [machineId]: at };
    recovery = { ...recovery, restartedMachines: { ...recovery.restartedMachines, ...restarted } };
  }
  const primaryDone =
    finished &&
    !cmd.background &&
    (cmd.type === 'RestartTrainerGroup' || cmd.type === 'RestartRolloutEngine' || (cmd.type === 'ReplaceMachine' && r.handledAs === 'rollout'));
  if (primaryDone) {
    recovery = { ...recovery, restartedAt: at };
    if (cmd.type === 'ReplaceMachine' && newMachineId) {
      // The new machine's agent may have registered before the orchestrator answered.
      recovery = {
        ...recovery,
        restartedMachines: { [newMachineId]: at },
        reportedIn: state.machines[newMachineId] ? { ...recovery.reportedIn, [newMachineId]: true } : recovery.reportedIn,
      };
    }
  }
  return withRecovery(state, recovery);
}

/** A restarted machine reporting in (registration or a phase) after its restart: the reconnect stage of its recovery ends. */
function lifeSign(state: ControllerState, machineId: string, at: number): ControllerState {
  let next = state;
  for (const r of Object.values(state.recoveries)) {
    const restartedAt = r.restartedMachines[machineId];
    if (r.done || restartedAt === undefined || at < restartedAt || r.reportedIn[machineId]) continue;
    next = withRecovery(next, { ...r, reportedIn: { ...r.reportedIn, [machineId]: true } });
  }
  return next;
}

function withSuspicions(state: ControllerState, suspicions: OpenSuspicions | undefined): ControllerState {
  if (suspicions === state.suspicions) return state;
  const { suspicions: _old, ...rest } = state;
  return suspicions ? { ...rest, suspicions } : rest;
}
