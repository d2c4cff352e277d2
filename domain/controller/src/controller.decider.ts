import { Decider } from '@robustrl/domain-kit';
import { DecisionRule, Draft, draft, Evidence, MessageOf, RecoveryAction } from '@robustrl/contracts';
import { ControllerState, initialControllerState, IssuedCommand, Recovery, RosterMachine } from './controller-state';
import { firstIterationFault, repeatedFaultInStep, restartFailedTwice } from './escalation-rules';
import { chooseWarmStandby } from './warm-standby';

/**
 * The controller of one job: the recovery workflow of paper Figure 7 as a decider.
 *
 *  - `observe` a message at `now`: a confirmed fault is decided on; command outcomes move a
 *    recovery on; membership, steps and checkpoints keep the picture current.
 *  - `tick`: commands that got no answer in time count as failed.
 *
 * Every decision is a RecoveryDecided naming the rule that fired, followed by the commands that carry
 * it out. Ids are derived from the verdict (`<verdict>/recovery`, `<recovery>/<n>`) so deciding on a
 * redelivered verdict yields nothing new and a rebuilt controller issues the same ids.
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
  'RecoveryCommandSucceeded',
  'RecoveryCommandFailed',
] as const;
export const CONTROLLER_OUTPUT_TYPES = [
  'RecoveryDecided',
  'RestartTrainerGroup',
  'PromoteRolloutToTrainer',
  'ReplaceMachine',
  'RestartTask',
  'RecoveryCommandFailed',
  'RecoveryCompleted',
] as const;
export type ControllerInput = MessageOf<(typeof CONTROLLER_INPUT_TYPES)[number]>;
export type ControllerEvent = MessageOf<(typeof CONTROLLER_INPUT_TYPES)[number] | (typeof CONTROLLER_OUTPUT_TYPES)[number]>;
export type ControllerCommand = { kind: 'observe'; message: ControllerInput; now: number } | { kind: 'tick'; now: number };

export interface ControllerSettings {
  /** A command with no answer after this long has failed (a dead agent cannot say so itself). */
  commandTimeoutMs: number;
  /**
   * `role-based` (paper Fig. 7): restart or replace only the failed role. `task-restart`: every fault
   * restarts the whole task in place — what ByteRobust-style systems do; the simulator's baseline.
   */
  policy: 'role-based' | 'task-restart';
}
/** Ten minutes covers a trainer re-initialisation and checkpoint reload of a large model (paper Fig. 14). */
export const DEFAULT_CONTROLLER_SETTINGS: ControllerSettings = { commandTimeoutMs: 600_000, policy: 'role-based' };

const timeOf = (iso: string) => Date.parse(iso);

export function createControllerDecider(overrides: Partial<ControllerSettings> = {}): Decider<ControllerState, ControllerCommand, ControllerEvent, Draft> {
  const settings: ControllerSettings = { ...DEFAULT_CONTROLLER_SETTINGS, ...overrides };
  function decide(command: ControllerCommand, state: ControllerState): Draft[] {
    if (command.kind === 'tick') return timedOutCommands(state, command.now);
    const { message, now } = command;
    switch (message.type) {
      case 'FaultConfirmed':
        return decideOnFault(state, message, now);
      case 'RecoveryCommandSucceeded':
        return onCommandSucceeded(evolve(state, message), message.data.commandId, now);
      case 'RecoveryCommandFailed':
        return onCommandFailed(evolve(state, message), message.data, now);
      case 'RolePhaseChanged':
      case 'MachineRegistered':
        return onLifeSign(evolve(state, message), message.data.machineId, now);
      default:
        return [];
    }
  }

  // ── deciding on a fault ────────────────────────────────────────────────────────────────────
  function decideOnFault(state: ControllerState, fault: MessageOf<'FaultConfirmed'>, now: number): Draft[] {
    const v = fault.data;
    if (state.decidedVerdicts[v.verdictId]) return [];
    const recoveryId = `${v.verdictId}/recovery`;
    const decided = (action: RecoveryAction, rule: DecisionRule, evidence: Evidence = v.evidence) =>
      draft('RecoveryDecided', { recoveryId, verdictId: v.verdictId, machineId: v.machineId, action, rule, step: state.step, evidence });

    const covering = coveringRecovery(state, v.machineId, v.handledAs);
    if (covering) {
      return [decided('report-only', 'covered-by-active-recovery', { ...v.evidence, detail: `covered by ${covering.recoveryId} (${covering.action})` })];
    }
    if (settings.policy === 'task-restart') return [decided('restart-task', 'task-restart-policy'), restartTask(recoveryId, 1, 'task-restart-policy')];
    const escalation = firstIterationFault(state) ?? repeatedFaultInStep(state, v.handledAs);
    if (escalation) return [decided('restart-task', escalation), restartTask(recoveryId, 1, escalation)];

    if (v.handledAs === 'rollout') {
      const m = state.machines[v.machineId] ?? { machineId: v.machineId, role: v.role, zone: 'unknown', hardwareClass: 'unknown', status: 'active' as const, inFlightRequests: 0 };
      return [decided('replace-rollout', 'rollout-fault'), replaceMachine(recoveryId, 1, m, 'rollout')];
    }
    const group = trainerGroup(state);
    if (v.machineFaulty) return faultyTrainerMachine(state, recoveryId, 1, v.machineId, decided);
    return [decided('restart-trainer-group', 'trainer-fault'), restartTrainerGroup(state, recoveryId, 1, group)];
  }

  /**
   * A trainer machine that must go (hardware evidence, unreachable, or a failed restart there):
   * semi-sync/async borrow a rollout as warm standby and refill the rollout pool; sync mode, or no
   * suitable rollout, asks for a new machine (paper §5.1.3).
   */
  function faultyTrainerMachine(
    state: ControllerState,
    recoveryId: string,
    seq: number,
    machineId: string,
    decided: (action: RecoveryAction, rule: DecisionRule, evidence?: Evidence) => Draft,
    evidence?: Evidence,
  ): Draft[] {
    const faulty = state.machines[machineId] ?? { machineId, role: 'trainer', zone: 'unknown', hardwareClass: 'unknown', status: 'active', inFlightRequests: 0 };
    const standby = state.mode !== 'sync' ? chooseWarmStandby(state, faulty) : null;
    if (standby) {
      return [
        decided('warm-standby-from-rollout', 'trainer-machine-faulty', evidence),
        draft('PromoteRolloutToTrainer', { recoveryId, commandId: `${recoveryId}/${seq}`, rolloutMachineId: standby.machineId, replacesMachineId: machineId }),
        replaceMachine(recoveryId, seq + 1, faulty, 'rollout'),
      ];
    }
    return [decided('request-new-trainer-machine', 'trainer-machine-faulty', evidence), replaceMachine(recoveryId, seq, faulty, faulty.role)];
  }

  // ── command outcomes ───────────────────────────────────────────────────────────────────────
  function onCommandSucceeded(state: ControllerState, commandId: string, now: number): Draft[] {
    const recovery = ownerOf(state, commandId);
    if (!recovery || recovery.done) return [];
    const cmd = recovery.commands[commandId];
    if (cmd.status !== 'succeeded') return []; // other machines of the group still owe an answer
    const next = recovery.commandSeq + 1;
    switch (cmd.type) {
      case 'PromoteRolloutToTrainer':
        return [restartTrainerGroupOf(recovery, next)];
      case 'ReplaceMachine':
        if (cmd.background) return [];
        if (recovery.handledAs === 'trainer') return [restartTrainerGroupOf(recovery, next, cmd.newMachineId)];
        return reportedInFully(recovery) ? [completed(recovery, now, 'recovered')] : [];
      case 'RestartTrainerGroup':
        return reportedInFully(recovery) ? [completed(recovery, now, 'recovered')] : [];
      case 'RestartTask':
        return [completed(recovery, now, 'escalated')];
    }
  }

  function onCommandFailed(state: ControllerState, failure: MessageOf<'RecoveryCommandFailed'>['data'], now: number): Draft[] {
    const recovery = ownerOf(state, failure.commandId);
    if (!recovery || recovery.done) return [];
    const cmd = recovery.commands[failure.commandId];
    const next = recovery.commandSeq + 1;
    const decided = (action: RecoveryAction, rule: DecisionRule, evidence: Evidence = {}) =>
      draft('RecoveryDecided', { recoveryId: recovery.recoveryId, verdictId: recovery.verdictId, machineId: recovery.machineId, action, rule, step: state.step, evidence });
    const evidence: Evidence = { detail: `${cmd.type} ${failure.commandId} failed${failure.machineId ? ` on ${failure.machineId}` : ''}: ${failure.error}` };

    if (cmd.type === 'RestartTask') return [completed(recovery, now, 'abandoned')];
    if (cmd.background) return []; // the pool refill failed: fewer rollouts, the job goes on
    const escalation = restartFailedTwice(recovery);
    if (escalation) return [decided('restart-task', escalation, evidence), restartTask(recovery.recoveryId, next, escalation)];

    if (recovery.handledAs === 'rollout') {
      if (recovery.failures >= 2) return [completed(recovery, now, 'abandoned')];
      const m = state.machines[recovery.machineId];
      return m ? [decided('replace-rollout', 'rollout-fault', evidence), replaceMachine(recovery.recoveryId, next, m, 'rollout')] : [completed(recovery, now, 'abandoned')];
    }
    // First failed trainer restart: if it failed on a machine, that machine is faulty (paper Fig. 7).
    const suspect = cmd.type === 'RestartTrainerGroup' ? failure.machineId : null;
    if (suspect) return faultyTrainerMachine(state, recovery.recoveryId, next, suspect, decided, evidence);
    if (cmd.type === 'PromoteRolloutToTrainer') {
      const faulty = state.machines[recovery.machineId];
      return faulty ? [decided('request-new-trainer-machine', 'trainer-machine-faulty', evidence), replaceMachine(recovery.recoveryId, next, faulty, faulty.role)] : [];
    }
    return [decided(recovery.action, recovery.rule, evidence), restartTrainerGroupOf(recovery, next)];
  }

  function timedOutCommands(state: ControllerState, now: number): Draft[] {
    const out: Draft[] = [];
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
        const after = evolve(state, { ...failed, occurredAt: new Date(now).toISOString() } as unknown as ControllerEvent);
        out.push(failed, ...onCommandFailed(after, failure, now));
        return out; // one outcome per tick keeps each decision based on the state that includes the last
      }
    }
    return out;
  }

  /** Reconnect stage: the recovery ends when every restarted machine has reported back. */
  function onLifeSign(state: ControllerState, machineId: string, now: number): Draft[] {
    const out: Draft[] = [];
    for (const r of Object.values(state.recoveries)) {
      if (!r.done && r.reportedIn[machineId] && reportedInFully(r)) out.push(completed(r, now, 'recovered'));
    }
    return out;
  }

  // ── command builders ───────────────────────────────────────────────────────────────────────
  function restartTrainerGroup(state: ControllerState, recoveryId: string, seq: number, machines: string[]): Draft {
    return draft('RestartTrainerGroup', {
      recoveryId,
      commandId: `${recoveryId}/${seq}`,
      machines,
      step: state.step,
      checkpointStep: state.lastCheckpointStep,
      keepBatch: true,
    });
  }

  function restartTrainerGroupOf(recovery: Recovery, seq: number, add: string | null = null): Draft {
    const machines = add && !recovery.trainerGroup.includes(add) ? [...recovery.trainerGroup, add] : recovery.trainerGroup;
    return draft('RestartTrainerGroup', {
      recoveryId: recovery.recoveryId,
      commandId: `${recovery.recoveryId}/${seq}`,
      machines,
      step: recovery.step,
      checkpointStep: recovery.checkpointStep,
      keepBatch: true,
    });
  }

  function replaceMachine(recoveryId: string, seq: number, m: RosterMachine, role: RosterMachine['role']): Draft {
    return draft('ReplaceMachine', { recoveryId, commandId: `${recoveryId}/${seq}`, machineId: m.machineId, role, zone: m.zone, hardwareClass: m.hardwareClass });
  }

  function restartTask(recoveryId: string, seq: number, rule: DecisionRule): Draft {
    return draft('RestartTask', { recoveryId, commandId: `${recoveryId}/${seq}`, rule });
  }

  function completed(r: Recovery, now: number, outcome: 'recovered' | 'escalated' | 'abandoned'): Draft {
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

  // ── state ──────────────────────────────────────────────────────────────────────────────────
  function evolve(state: ControllerState, event: ControllerEvent): ControllerState {
    const at = timeOf(event.occurredAt);
    switch (event.type) {
      case 'JobStarted':
        return {
          ...state,
          mode: event.data.mode,
          firstIteration: true,
          step: event.data.resumedFromStep === null ? 0 : event.data.resumedFromStep + 1,
          lastCheckpointStep: event.data.resumedFromStep ?? state.lastCheckpointStep,
          trainerFaultsInStep: { step: -1, count: 0 },
        };
      case 'MachineRegistered': {
        const d = event.data;
        const prior = state.machines[d.machineId];
        // A registration overtaken by the machine's verdict (another topic) keeps the status it has since.
        const status = prior && prior.status !== 'active' ? prior.status : 'active';
        const registered = withMachine(state, { machineId: d.machineId, role: d.role, zone: d.zone, hardwareClass: d.hardwareClass, status, inFlightRequests: prior?.inFlightRequests ?? 0 });
        return lifeSign(registered, d.machineId, at);
      }
      case 'MachineRoleChanged': {
        const m = state.machines[event.data.machineId];
        return m ? withMachine(state, { ...m, role: event.data.to }) : state;
      }
      case 'MachineDeregistered': {
        const m = state.machines[event.data.machineId];
        return m ? withMachine(state, { ...m, status: 'gone' }) : state;
      }
      case 'RolloutThroughputSampled': {
        const m = state.machines[event.data.machineId];
        return m ? withMachine(state, { ...m, inFlightRequests: event.data.inFlightRequests }) : state;
      }
      case 'TrainingStepStarted':
        return { ...state, step: event.data.step };
      case 'TrainingStepCompleted':
        return { ...state, firstIteration: false, step: Math.max(state.step, event.data.step + 1) };
      case 'CheckpointSaved':
        return { ...state, lastCheckpointStep: Math.max(state.lastCheckpointStep ?? -1, event.data.step) };
      case 'RolePhaseChanged':
        return lifeSign(state, event.data.machineId, at);
      case 'FaultConfirmed': {
        // A verdict may overtake the machine's registration (another topic): know the machine from it.
        const known = state.machines[event.data.machineId]
          ? state
          : withMachine(state, { machineId: event.data.machineId, role: event.data.role, zone: 'unknown', hardwareClass: 'unknown', status: 'active', inFlightRequests: 0 });
        return { ...known, faults: { ...state.faults, [event.data.verdictId]: { at, detectMs: event.data.detectionLatencyMs, handledAs: event.data.handledAs } } };
      }
      case 'RecoveryDecided':
        return onDecided(state, event, at);
      case 'RestartTrainerGroup':
      case 'PromoteRolloutToTrainer':
      case 'ReplaceMachine':
      case 'RestartTask':
        return onIssued(state, event, at);
      case 'RecoveryCommandSucceeded':
      case 'RecoveryCommandFailed':
        return onOutcome(state, event, at);
      case 'RecoveryCompleted': {
        const r = state.recoveries[event.data.recoveryId];
        return r ? withRecovery(state, { ...r, done: true }) : state;
      }
    }
  }

  function onDecided(state: ControllerState, event: MessageOf<'RecoveryDecided'>, at: number): ControllerState {
    const d = event.data;
    const existing = state.recoveries[d.recoveryId];
    const decidedVerdicts = { ...state.decidedVerdicts, [d.verdictId]: d.recoveryId };
    if (existing) return withRecovery({ ...state, decidedVerdicts }, { ...existing, action: d.action, rule: d.rule });
    const acted = d.action !== 'report-only';
    const fault = state.faults[d.verdictId];
    const recovery: Recovery = {
      recoveryId: d.recoveryId,
      verdictId: d.verdictId,
      machineId: d.machineId,
      handledAs: fault?.handledAs ?? (d.action === 'replace-rollout' ? 'rollout' : 'trainer'),
      action: d.action,
      rule: d.rule,
      faultAt: fault?.at ?? at,
      decidedAt: at,
      detectMs: fault?.detectMs ?? 0,
      commands: {},
      commandSeq: 0,
      failures: 0,
      trainerGroup: d.action === 'restart-trainer-group' || d.action === 'warm-standby-from-rollout' || d.action === 'request-new-trainer-machine' ? trainerGroup(state) : [],
      step: state.step,
      checkpointStep: state.lastCheckpointStep,
      restartedAt: null,
      restartedMachines: {},
      reportedIn: {},
      done: !acted,
    };
    const countsAsTrainerFault = acted && recovery.handledAs === 'trainer' && d.action !== 'restart-task';
    const trainerFaultsInStep = countsAsTrainerFault
      ? { step: state.step, count: state.trainerFaultsInStep.step === state.step ? state.trainerFaultsInStep.count + 1 : 1 }
      : state.trainerFaultsInStep;
    return withRecovery({ ...state, decidedVerdicts, trainerFaultsInStep }, recovery);
  }

  function onIssued(state: ControllerState, event: MessageOf<'RestartTrainerGroup' | 'PromoteRolloutToTrainer' | 'ReplaceMachine' | 'RestartTask'>, at: number): ControllerState {
    const r = state.recoveries[event.data.recoveryId];
    if (!r) return state;
    const seq = Number(event.data.commandId.slice(event.data.commandId.lastIndexOf('/') + 1)) || r.commandSeq + 1;
    let machines = state.machines;
    let trainerGroupNow = r.trainerGroup;
    let awaiting: string[] = [];
    let subject: string | null = null;
    let background = false;
    switch (event.type) {
      case 'RestartTrainerGroup':
        awaiting = [...event.data.machines];
        trainerGroupNow = [...event.data.machines];
        break;
      case 'PromoteRolloutToTrainer':
        subject = event.data.rolloutMachineId;
        awaiting = [event.data.rolloutMachineId];
        trainerGroupNow = [...r.trainerGroup.filter((m) => m !== event.data.replacesMachineId), event.data.rolloutMachineId];
        break;
      case 'ReplaceMachine': {
        subject = event.data.machineId;
        const m = machines[event.data.machineId];
        if (m) machines = { ...machines, [m.machineId]: { ...m, status: 'isolated' } };
        trainerGroupNow = r.trainerGroup.filter((id) => id !== event.data.machineId);
        // A rollout refilling the pool after a warm standby does not hold up the trainer's recovery.
        background = r.handledAs === 'trainer' && event.data.role === 'rollout';
        break;
      }
      case 'RestartTask':
        break;
    }
    const cmd: IssuedCommand = { commandId: event.data.commandId, type: event.type, issuedAt: at, awaiting, status: 'pending', background, subject, newMachineId: null };
    return withRecovery(
      { ...state, machines, commandOwner: { ...state.commandOwner, [cmd.commandId]: r.recoveryId } },
      { ...r, commandSeq: Math.max(r.commandSeq, seq), trainerGroup: trainerGroupNow, commands: { ...r.commands, [cmd.commandId]: cmd } },
    );
  }

  function onOutcome(state: ControllerState, event: MessageOf<'RecoveryCommandSucceeded' | 'RecoveryCommandFailed'>, at: number): ControllerState {
    const r = ownerOf(state, event.data.commandId);
    if (!r) return state;
    const cmd = r.commands[event.data.commandId];
    if (!cmd || cmd.status !== 'pending') return state;
    if (event.type === 'RecoveryCommandFailed') {
      // A failed pool refill is not a failed restart (rule 3 counts restarts); a standby that could
      // not be promoted is not part of the trainer group.
      const failures = cmd.background ? r.failures : r.failures + 1;
      const trainerGroup = cmd.type === 'PromoteRolloutToTrainer' ? r.trainerGroup.filter((m) => m !== cmd.subject) : r.trainerGroup;
      return withRecovery(state, { ...r, failures, trainerGroup, commands: { ...r.commands, [cmd.commandId]: { ...cmd, status: 'failed' } } });
    }
    const machineId = event.data.machineId;
    const awaiting = machineId === null ? [] : cmd.awaiting.filter((m) => m !== machineId);
    const finished = awaiting.length === 0;
    const newMachineId = event.data.newMachineId ?? cmd.newMachineId;
    let recovery: Recovery = { ...r, commands: { ...r.commands, [cmd.commandId]: { ...cmd, awaiting, status: finished ? 'succeeded' : 'pending', newMachineId } } };
    if (cmd.type === 'RestartTrainerGroup') {
      // Each machine must report in after its own restart: a phase from the process being replaced does not count.
      const restarted = machineId === null ? Object.fromEntries(cmd.awaiting.map((m) => [m, at])) : { [machineId]: at };
      recovery = { ...recovery, restartedMachines: { ...recovery.restartedMachines, ...restarted } };
    }
    const primaryDone = finished && !cmd.background && (cmd.type === 'RestartTrainerGroup' || (cmd.type === 'ReplaceMachine' && r.handledAs === 'rollout'));
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

  function lifeSign(state: ControllerState, machineId: string, at: number): ControllerState {
    let next = state;
    for (const r of Object.values(state.recoveries)) {
      const restartedAt = r.restartedMachines[machineId];
      if (r.done || restartedAt === undefined || at < restartedAt || r.reportedIn[machineId]) continue;
      next = withRecovery(next, { ...r, reportedIn: { ...r.reportedIn, [machineId]: true } });
    }
    return next;
  }

  return {
    initialState: initialControllerState,
    decide,
    evolve,
  };
}

function withMachine(state: ControllerState, m: RosterMachine): ControllerState {
  return { ...state, machines: { ...state.machines, [m.machineId]: m } };
}

function withRecovery(state: ControllerState, r: Recovery): ControllerState {
  return { ...state, recoveries: { ...state.recoveries, [r.recoveryId]: r } };
}

function ownerOf(state: ControllerState, commandId: string): Recovery | undefined {
  const id = state.commandOwner[commandId];
  return id ? state.recoveries[id] : undefined;
}

function trainerGroup(state: ControllerState): string[] {
  return Object.values(state.machines)
    .filter((m) => m.status === 'active' && (m.role === 'trainer' || m.role === 'hybrid'))
    .map((m) => m.machineId)
    .sort();
}

/** Restarted and every restarted machine has reported in since. */
function reportedInFully(r: Recovery): boolean {
  const machines = Object.keys(r.restartedMachines);
  return r.restartedAt !== null && machines.length > 0 && machines.every((m) => r.reportedIn[m]);
}

/** An unfinished recovery that already covers this fault: the same machine, or the trainer group it is restarting. */
function coveringRecovery(state: ControllerState, machineId: string, handledAs: 'trainer' | 'rollout'): Recovery | undefined {
  return Object.values(state.recoveries).find(
    (r) =>
      !r.done &&
      r.action !== 'report-only' &&
      (r.action === 'restart-task' || r.machineId === machineId || (handledAs === 'trainer' && r.handledAs === 'trainer')),
  );
}

export const ControllerDecider = createControllerDecider();
