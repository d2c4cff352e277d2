import { DecisionRule, Draft, draft, Evidence, Handover, RecoveryAction } from '@robustrl/contracts';
import { batchOfStep, ControllerDraft, ControllerData, Recovery, RosterMachine } from './controller.state';

/**
 * The controller's outputs, built in one place. Command ids are `<recovery>/<n>` and recovery ids
 * `<verdict>/recovery`, so deciding twice from the same state yields the same ids. They read the facts
 * only (`ControllerData`, no index): the full-recompute reference the specs hold the controller to
 * builds its outputs with them too.
 */

/** The decision record of a recovery, naming the rule that fired. */
export function decision(
  state: ControllerData,
  r: { recoveryId: string; verdictId: string; machineId: string },
  action: RecoveryAction,
  rule: DecisionRule,
  evidence: Evidence,
  handover?: Handover,
): ControllerDraft {
  return draft('RecoveryDecided', {
    recoveryId: r.recoveryId,
    verdictId: r.verdictId,
    machineId: r.machineId,
    action,
    rule,
    step: state.step,
    evidence,
    ...(handover ? { handover } : {}),
  });
}

/**
 * The registered incarnations of `machines`, as far as the roster knows them: a command names the agent
 * processes it was issued for, so an agent started after it (a replay, a restart) does not act on it.
 */
function addressedTo(state: ControllerData, machines: readonly string[]): { incarnations?: Record<string, string> } {
  const known = machines.flatMap((id) => {
    const incarnation = state.machines[id]?.incarnation;
    return incarnation ? [[id, incarnation] as const] : [];
  });
  return known.length > 0 ? { incarnations: Object.fromEntries(known) } : {};
}

/**
 * What a re-formed trainer group needs beyond its members: each member's reachable host (and agent
 * address, for agents that register no host), so every rank finds rank 0's to meet at, and the batch
 * the retried step keeps.
 */
function groupContext(
  state: ControllerData,
  machines: readonly string[],
  batchId: string | null,
): { agentAddresses?: Record<string, string>; hostAddresses?: Record<string, string>; batchId?: string } {
  const known = (field: 'agentAddress' | 'hostAddress') =>
    machines.flatMap((id) => {
      const address = state.machines[id]?.[field];
      return address ? [[id, address] as const] : [];
    });
  const agents = known('agentAddress');
  const hosts = known('hostAddress');
  return {
    ...(agents.length > 0 ? { agentAddresses: Object.fromEntries(agents) } : {}),
    ...(hosts.length > 0 ? { hostAddresses: Object.fromEntries(hosts) } : {}),
    ...(batchId ? { batchId } : {}),
  };
}

/** Restart the trainer group in place: reload the per-step checkpoint and retry the step on its batch (paper §5.1.2). */
export function restartTrainerGroup(state: ControllerData, recoveryId: string, seq: number, machines: string[]): ControllerDraft {
  return draft('RestartTrainerGroup', {
    recoveryId,
    commandId: `${recoveryId}/${seq}`,
    machines,
    step: state.step,
    checkpointStep: state.lastCheckpointStep,
    keepBatch: true,
    ...addressedTo(state, machines),
    ...groupContext(state, machines, batchOfStep(state, state.step)),
    trainerEpoch: nextTrainerEpoch(state),
  });
}

/** The same restart for a recovery already under way: its step and checkpoint, its (re-formed) group plus a new machine. */
export function restartTrainerGroupOf(state: ControllerData, recovery: Recovery, seq: number, add: string | null = null): Draft<'RestartTrainerGroup'> {
  const machines = add && !recovery.trainerGroup.includes(add) ? [...recovery.trainerGroup, add] : recovery.trainerGroup;
  return draft('RestartTrainerGroup', {
    recoveryId: recovery.recoveryId,
    commandId: `${recovery.recoveryId}/${seq}`,
    machines,
    step: recovery.step,
    checkpointStep: recovery.checkpointStep,
    keepBatch: true,
    ...addressedTo(state, machines),
    ...groupContext(state, machines, recovery.batchId ?? null),
    trainerEpoch: nextTrainerEpoch(state),
  });
}

export function promoteRollout(recoveryId: string, seq: number, standby: RosterMachine, replacesMachineId: string): ControllerDraft {
  return draft('PromoteRolloutToTrainer', {
    recoveryId,
    commandId: `${recoveryId}/${seq}`,
    rolloutMachineId: standby.machineId,
    replacesMachineId,
    ...(standby.incarnation ? { incarnation: standby.incarnation } : {}),
  });
}

export function replaceMachine(recoveryId: string, seq: number, m: RosterMachine, role: RosterMachine['role']): ControllerDraft {
  return draft('ReplaceMachine', { recoveryId, commandId: `${recoveryId}/${seq}`, machineId: m.machineId, role, zone: m.zone, hardwareClass: m.hardwareClass });
}

/** Restart the rollout engine on its machine in place: `attempt` of the machine's `budget` within the window. */
export function restartRolloutEngine(recoveryId: string, seq: number, m: RosterMachine, attempt: number, budget: number): ControllerDraft {
  return draft('RestartRolloutEngine', {
    recoveryId,
    commandId: `${recoveryId}/${seq}`,
    machineId: m.machineId,
    attempt,
    budget,
    ...(m.incarnation ? { incarnation: m.incarnation } : {}),
  });
}

export function restartTask(state: ControllerData, recoveryId: string, seq: number, rule: DecisionRule): ControllerDraft {
  return draft('RestartTask', { recoveryId, commandId: `${recoveryId}/${seq}`, rule, trainerEpoch: nextTrainerEpoch(state) });
}

/** A newly formed group fences every older one (docs/contributors/recovery.md "Fencing"): one more than the newest the controller formed. */
const nextTrainerEpoch = (state: ControllerData): number => (state.trainerEpoch ?? 0) + 1;

/** The end of a recovery with its stage latencies: detect, decide, restart (commands issued → done), reconnect (done → reported in). */
export function completed(r: Recovery, now: number, outcome: 'recovered' | 'escalated' | 'abandoned'): ControllerDraft {
  const restartEnd = r.restartedAt ?? now;
  return draft('RecoveryCompleted', {
    recoveryId: r.recoveryId,
    outcome,
    stagesMs: {
      detect: Math.round(r.detectMs),
      decide: Math.max(0, Math.round(r.decidedAt - r.faultAt)),
      restart: Math.max(0, Math.round(restartEnd - r.decidedAt)),
      reconnect: Math.max(0, Math.round(now - restartEnd)),
    },
  });
}
