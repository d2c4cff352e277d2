import type { Draft } from '@robustrl/contracts';
import { assertNever } from '@robustrl/domain-kit';
import { verdictMeansMachineGone } from './machine-gone';
import { restartsItsMachine, withTrainerRestart } from './machine-restart-budget';
import { batchOfStep, ControllerFact, ControllerState, IssuedCommand, overtaken, ownerOf, Recovery, trainerGroup, unknownMachine } from './controller.state';
import { applyOutcome } from './command-outcome';
import { settle, suspect } from './open-suspicions';
import { afterHandover, handoverOf } from './planned-handover';

/**
 * Folds one fact into the controller state at `at` — in place (the decider's evolution is `in-place`):
 * the event's own time, or `now` for an output the controller just decided. `heardAt` is when the
 * controller observed it (its own clock; `at` in a replay): a command's outcome and a restarted machine's
 * life sign are compared at it, since a machine's clock can be minutes off (docs/contributors/detection.md "Whose clock") — a
 * life sign heard after the restart's outcome counts as the new process's.
 *
 * In place because a job of thousands of machines cannot copy its roster for every throughput sample
 * nor its recovery table for every command outcome. What evolve writes is the state's own:
 * records are updated in place, but an array a draft may have been built from (a trainer group, a
 * command's awaited machines) is replaced, never changed, so an output already published stays as it was.
 * `index.open` follows `done`; phase changes and registrations look only at the open recoveries.
 */
export function evolveController(state: ControllerState, fact: ControllerFact, at: number, heardAt = at): ControllerState {
  switch (fact.type) {
    case 'JobStarted':
      state.mode = fact.data.mode;
      // Read after a step it precedes (another topic, replayed): the job is past its first iteration.
      if (overtaken(state, at)) return state;
      state.firstIteration = true;
      state.step = fact.data.resumedFromStep === null ? 0 : fact.data.resumedFromStep + 1;
      state.lastCheckpointStep = fact.data.resumedFromStep ?? state.lastCheckpointStep;
      state.trainerFaultsInStep = { step: -1, count: 0 };
      return state;
    case 'MachineRegistered': {
      const d = fact.data;
      const prior = state.machines[d.machineId];
      // A registration overtaken by the machine's verdict (another topic) keeps the status it has since.
      const status = prior && prior.status !== 'active' ? prior.status : 'active';
      state.machines[d.machineId] = {
        machineId: d.machineId,
        role: d.role,
        zone: d.zone,
        hardwareClass: d.hardwareClass,
        status,
        inFlightRequests: prior?.inFlightRequests ?? 0,
        incarnation: d.incarnation ?? null,
        agentAddress: d.agentAddress,
        hostAddress: d.hostAddress ?? null,
      };
      // Registered again after it was confirmed faulty: an agent answers there now.
      const faultyAt = state.faultyMachines?.[d.machineId];
      if (faultyAt !== undefined && at > faultyAt) delete state.faultyMachines![d.machineId];
      // A new incarnation: what was suspected of the old one is not known of it.
      state.suspicions = settle(state.suspicions, d.machineId);
      lifeSign(state, d.machineId, heardAt);
      return state;
    }
    case 'MachineRoleChanged': {
      const m = state.machines[fact.data.machineId];
      if (m) m.role = fact.data.to;
      return state;
    }
    case 'MachineDeregistered': {
      const m = state.machines[fact.data.machineId];
      if (m) m.status = 'gone';
      return state;
    }
    case 'RolloutThroughputSampled': {
      const m = state.machines[fact.data.machineId];
      if (m) m.inFlightRequests = fact.data.inFlightRequests;
      return state;
    }
    case 'TrainingStepStarted':
      state.step = fact.data.step;
      state.stepBatch = { step: fact.data.step, batchId: fact.data.batchId };
      state.stepStartedAt = at;
      return state;
    case 'TrainingStepCompleted':
      state.firstIteration = false;
      state.lastStepMs = fact.data.durationMs;
      state.lastStepCompletedAt = Math.max(state.lastStepCompletedAt ?? at, at);
      state.step = Math.max(state.step, fact.data.step + 1);
      return state;
    case 'CheckpointSaved':
      state.lastCheckpointStep = Math.max(state.lastCheckpointStep ?? -1, fact.data.step);
      state.lastCheckpointBlockingMs = fact.data.blockingMs;
      return state;
    case 'RolePhaseChanged':
      lifeSign(state, fact.data.machineId, heardAt);
      return state;
    case 'FaultConfirmed': {
      const { machineId, verdictId } = fact.data;
      // A verdict may overtake the machine's registration (another topic): know the machine from it.
      // decide reads the roster as it was before the verdict, so it is told which machine this added.
      const learned = !state.machines[machineId];
      if (learned) state.machines[machineId] = unknownMachine(machineId, fact.data.role);
      state.index.learnedFromVerdict = learned ? { verdictId, machineId } : null;
      state.faults[verdictId] = { at, detectMs: fact.data.detectionLatencyMs, handledAs: fact.data.handledAs };
      if (verdictMeansMachineGone(fact.data)) (state.faultyMachines ??= {})[machineId] = at;
      state.suspicions = settle(state.suspicions, machineId, fact.data.rule);
      return state;
    }
    case 'FaultSuspected':
      state.suspicions = suspect(state.suspicions, fact.data.machineId, fact.data.rule);
      return state;
    case 'SuspicionCleared':
      state.suspicions = settle(state.suspicions, fact.data.machineId, fact.data.rule);
      return state;
    case 'RecoveryDecided':
      return onDecided(state, fact, at);
    case 'RestartTrainerGroup':
    case 'PromoteRolloutToTrainer':
    case 'ReplaceMachine':
    case 'RestartRolloutEngine':
    case 'RestartTask':
      if ((fact.type === 'RestartTrainerGroup' || fact.type === 'RestartTask') && fact.data.trainerEpoch !== undefined)
        state.trainerEpoch = Math.max(state.trainerEpoch ?? 0, fact.data.trainerEpoch);
      return onIssued(state, fact, at);
    case 'RecoveryCommandSucceeded':
    case 'RecoveryCommandFailed': {
      const r = ownerOf(state, fact.data.commandId);
      if (r) applyOutcome(state, r, fact, heardAt);
      return state;
    }
    case 'RecoveryCompleted': {
      const r = state.recoveries[fact.data.recoveryId];
      if (r) {
        r.done = true;
        state.index.open.delete(r.recoveryId);
      }
      return state;
    }
    default:
      return assertNever(fact, 'controller event');
  }
}

function onDecided(state: ControllerState, fact: Draft<'RecoveryDecided'>, at: number): ControllerState {
  const d = fact.data;
  const existing = state.recoveries[d.recoveryId];
  state.decidedVerdicts[d.verdictId] = d.recoveryId;
  if (existing) {
    existing.action = d.action;
    existing.rule = d.rule;
    // The handover ended: a saved checkpoint moves the group to the step after it (planned-handover.ts).
    if (d.handover) Object.assign(existing, afterHandover(state, existing, handoverOf(d.handover)));
    return state;
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
  if (acted && recovery.handledAs === 'trainer' && d.action !== 'restart-task') {
    state.trainerFaultsInStep = { step: state.step, count: state.trainerFaultsInStep.step === state.step ? state.trainerFaultsInStep.count + 1 : 1 };
  }
  if (acted && recovery.handledAs === 'trainer' && restartsItsMachine(d)) state.trainerRestarts = withTrainerRestart(state.trainerRestarts, d.machineId, at);
  state.recoveries[recovery.recoveryId] = recovery;
  if (!recovery.done) state.index.open.add(recovery.recoveryId);
  return state;
}

function onIssued(
  state: ControllerState,
  fact: Draft<'RestartTrainerGroup' | 'PromoteRolloutToTrainer' | 'ReplaceMachine' | 'RestartRolloutEngine' | 'RestartTask'>,
  at: number,
): ControllerState {
  const r = state.recoveries[fact.data.recoveryId];
  if (!r) return state;
  const seq = Number(fact.data.commandId.slice(fact.data.commandId.lastIndexOf('/') + 1)) || r.commandSeq + 1;
  let awaiting: string[] = [];
  let subject: string | null = null;
  let background = false;
  let replaces: string | null = null;
  switch (fact.type) {
    case 'RestartTrainerGroup':
      awaiting = [...fact.data.machines];
      r.trainerGroup = [...fact.data.machines];
      break;
    case 'PromoteRolloutToTrainer':
      subject = fact.data.rolloutMachineId;
      awaiting = [fact.data.rolloutMachineId];
      r.trainerGroup = [...r.trainerGroup.filter((m) => m !== fact.data.replacesMachineId), fact.data.rolloutMachineId];
      replanned(r, fact.data.replacesMachineId);
      replaces = fact.data.replacesMachineId;
      break;
    case 'ReplaceMachine': {
      subject = fact.data.machineId;
      const m = state.machines[fact.data.machineId];
      if (m) m.status = 'isolated';
      r.trainerGroup = r.trainerGroup.filter((id) => id !== fact.data.machineId);
      if (r.handledAs === 'trainer') replanned(r, fact.data.machineId);
      // A rollout refilling the pool after a warm standby does not hold up the trainer's recovery.
      background = r.handledAs === 'trainer' && fact.data.role === 'rollout';
      break;
    }
    case 'RestartRolloutEngine': {
      subject = fact.data.machineId;
      awaiting = [fact.data.machineId];
      // Its agent re-registers once the engine is back, possibly before the answer arrives (another
      // topic): any life sign after the command was issued is the restarted engine's.
      r.restartedMachines = { [fact.data.machineId]: at };
      const restarts = (state.engineRestarts ??= {});
      (restarts[fact.data.machineId] ??= []).push(at);
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
    ...(replaces === null ? {} : { replaces }),
  };
  state.commandOwner[cmd.commandId] = r.recoveryId;
  r.commandSeq = Math.max(r.commandSeq, seq);
  r.commands[cmd.commandId] = cmd;
  return state;
}

/**
 * A trainer recovery that takes `leaving` out of its group starts its restart stage again: the machine no
 * longer owes a report, and the recovery is not complete until the re-formed group has restarted.
 */
function replanned(r: Recovery, leaving: string): void {
  delete r.restartedMachines[leaving];
  r.restartedAt = null;
}

/** A restarted machine reporting in (registration or a phase) after its restart: the reconnect stage of its recovery ends. */
function lifeSign(state: ControllerState, machineId: string, at: number): void {
  for (const id of state.index.open) {
    const r = state.recoveries[id];
    const restartedAt = r.restartedMachines[machineId];
    if (restartedAt === undefined || at < restartedAt || r.reportedIn[machineId]) continue;
    r.reportedIn[machineId] = true;
  }
}
