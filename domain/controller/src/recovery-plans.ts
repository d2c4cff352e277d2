import { DecisionRule, Evidence } from '@robustrl/contracts';
import { ControllerDraft, ControllerState, Recovery, unknownMachine } from './controller.state';
import { decision, promoteRollout, replaceMachine } from './recovery-commands';
import { chooseWarmStandby } from './warm-standby';
import { HandoverState, handoverRecord } from './planned-handover';

/**
 * Plans the controller's decisions share (controller.decide.ts): replacing a trainer machine that must
 * go, and finding the open recovery a fault falls under.
 */

/**
 * A trainer machine that must go (hardware evidence, unreachable, or a failed restart there):
 * semi-sync/async borrow a rollout as warm standby and refill the rollout pool; sync mode, or no
 * suitable rollout, asks for a new machine (paper §5.1.3).
 */
export function faultyTrainerMachine(
  state: ControllerState,
  recovery: { recoveryId: string; verdictId: string; machineId: string },
  seq: number,
  machineId: string,
  evidence: Evidence,
  rule: DecisionRule = 'trainer-machine-faulty',
  /** A departing machine moved at its step's checkpoint: it is isolated (refilled, replaced) only when the group moves (planned-handover.ts). */
  handover?: HandoverState,
): ControllerDraft[] {
  const faulty = state.machines[machineId] ?? unknownMachine(machineId, 'trainer');
  const standby = state.mode !== 'sync' ? chooseWarmStandby(state, faulty) : null;
  const record = handover && handoverRecord(handover);
  if (standby) {
    const lent = [decision(state, recovery, 'warm-standby-from-rollout', rule, evidence, record), promoteRollout(recovery.recoveryId, seq, standby, machineId)];
    return handover ? lent : [...lent, replaceMachine(recovery.recoveryId, seq + 1, faulty, 'rollout')];
  }
  const decided = decision(state, recovery, 'request-new-trainer-machine', rule, evidence, record);
  return handover ? [decided] : [decided, replaceMachine(recovery.recoveryId, seq, faulty, faulty.role)];
}

/**
 * An unfinished recovery that already covers this fault: the same machine, the trainer group it is
 * restarting, or a machine it brings into that group (a rollout lent as warm standby goes quiet as a
 * rollout the moment it is promoted: replacing it would take a rank from the group being restarted).
 */
export function coveringRecovery(state: ControllerState, machineId: string, handledAs: 'trainer' | 'rollout'): Recovery | undefined {
  for (const id of state.index.open) {
    const r = state.recoveries[id];
    if (r.action !== 'report-only' && covers(r, machineId, handledAs)) return r;
  }
  return undefined;
}

function covers(r: Recovery, machineId: string, handledAs: 'trainer' | 'rollout'): boolean {
  if (r.action === 'restart-task' || r.machineId === machineId) return true;
  return r.handledAs === 'trainer' && (handledAs === 'trainer' || r.trainerGroup.includes(machineId));
}
