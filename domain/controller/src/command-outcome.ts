import type { Draft } from '@robustrl/contracts';
import type { ControllerState, Recovery } from './controller.state';

// Shared by evolve (which folds the outcome into the state) and decide (which reads a view with an
// outcome it has just decided folded into a copy): decide never imports evolve.

/**
 * A command's outcome folded into its recovery `r`, in place. `state` is only read (the roster). decide
 * calls it on a copy of the recovery (`outcomeView`) when it must see an outcome it has just decided.
 */
export function applyOutcome(state: ControllerState, r: Recovery, fact: Draft<'RecoveryCommandSucceeded' | 'RecoveryCommandFailed'>, at: number): void {
  const cmd = r.commands[fact.data.commandId];
  if (!cmd || cmd.status !== 'pending') return;
  if (fact.type === 'RecoveryCommandFailed') {
    // A failed pool refill is not a failed restart (rule 3 counts restarts); a standby that could
    // not be promoted is not part of the trainer group.
    if (!cmd.background) r.failures += 1;
    if (cmd.type === 'PromoteRolloutToTrainer') r.trainerGroup = r.trainerGroup.filter((m) => m !== cmd.subject);
    r.commands[cmd.commandId] = { ...cmd, status: 'failed' };
    return;
  }
  const machineId = fact.data.machineId;
  const awaiting = machineId === null ? [] : cmd.awaiting.filter((m) => m !== machineId);
  const finished = awaiting.length === 0;
  const newMachineId = fact.data.newMachineId ?? cmd.newMachineId;
  r.commands[cmd.commandId] = { ...cmd, awaiting, status: finished ? 'succeeded' : 'pending', newMachineId };
  if (cmd.type === 'RestartTrainerGroup') {
    // Each machine must report in after its own restart: a phase from the process being replaced does not count.
    if (machineId === null) for (const m of cmd.awaiting) r.restartedMachines[m] = at;
    else r.restartedMachines[machineId] = at;
  }
  const primaryDone =
    finished &&
    !cmd.background &&
    (cmd.type === 'RestartTrainerGroup' || cmd.type === 'RestartRolloutEngine' || (cmd.type === 'ReplaceMachine' && r.handledAs === 'rollout'));
  if (primaryDone) {
    r.restartedAt = at;
    if (cmd.type === 'ReplaceMachine' && newMachineId) {
      // The new machine's agent may have registered before the orchestrator answered.
      r.restartedMachines = { [newMachineId]: at };
      if (state.machines[newMachineId]) r.reportedIn[newMachineId] = true;
    }
  }
}

/**
 * `state` with an outcome folded into a copy of its recovery: what decide reads after deciding that
 * outcome itself. Only that recovery changes (and only its records and counters), so the view shares
 * everything else — a timeout is rare, so copying the recovery table for it is cheap.
 */
export function withOutcome(state: ControllerState, r: Recovery, outcome: Draft<'RecoveryCommandFailed'>, at: number): ControllerState {
  const copy: Recovery = { ...r, commands: { ...r.commands }, restartedMachines: { ...r.restartedMachines }, reportedIn: { ...r.reportedIn } };
  applyOutcome(state, copy, outcome, at);
  return { ...state, recoveries: { ...state.recoveries, [copy.recoveryId]: copy } };
}
