import { DeciderRun } from '@robustrl/domain-kit';
import { DataOf, Draft, Role, TrainingMode } from '@robustrl/contracts';
import { at, iso, published, timeline } from '@robustrl/testing/job-timeline';
import { ControllerDecider, ControllerEvent, ControllerInput } from '../controller.decider';

/** The controller specs' story-telling: a job's history, its faults and command outcomes, played through the host step. */
export const msg = timeline();

export const register = (machineId: string, role: Role, s = 0, zone = 'az-1', hardwareClass = 'h100x8') =>
  msg(s, 'MachineRegistered', { machineId, role, zone, hardwareClass, gpus: 8, agentAddress: `${machineId}:7070`, dpRank: 0 });

/** A semi-sync job (unless told otherwise) past its first iteration, at step 3 with a checkpoint of step 2. */
export function jobAtStep3(mode: TrainingMode = 'semi-sync') {
  return [
    msg(0, 'JobStarted', { mode, resumedFromStep: null, trainerMachines: 2, rolloutMachines: 3 }),
    register('trainer-0', mode === 'sync' ? 'hybrid' : 'trainer'),
    register('trainer-1', mode === 'sync' ? 'hybrid' : 'trainer'),
    ...(mode === 'sync' ? [] : [register('rollout-0', 'rollout'), register('rollout-1', 'rollout'), register('rollout-2', 'rollout', 0, 'az-2')]),
    msg(1, 'TrainingStepStarted', { step: 0, batchId: 'b0', startedAt: iso(1) }),
    msg(50, 'TrainingStepCompleted', { step: 0, batchId: 'b0', durationMs: 49_000 }),
    msg(300, 'CheckpointSaved', { step: 2, uri: 'file:///ckpt/2', blockingMs: 900 }),
    msg(301, 'TrainingStepStarted', { step: 3, batchId: 'b3', startedAt: iso(301) }),
  ];
}

export const fault = (s: number, machineId: string, extra: Partial<DataOf<'FaultConfirmed'>> = {}) =>
  msg(s, 'FaultConfirmed', {
    verdictId: `${machineId}/v${s}`,
    machineId,
    role: 'trainer',
    rule: 'explicit-signal',
    handledAs: 'trainer',
    machineFaulty: false,
    detectionLatencyMs: 0,
    evidence: { signal: 'process-exited' },
    ...extra,
  });
/** A rollout machine gone silent, its probe unanswered: the machine itself is unreachable (hardware evidence). */
export const rolloutMachineLost = (s: number, machineId: string, extra: Partial<DataOf<'FaultConfirmed'>> = {}) =>
  fault(s, machineId, {
    role: 'rollout',
    handledAs: 'rollout',
    rule: 'rollout-silent',
    machineFaulty: true,
    evidence: { detail: 'probe unanswered' },
    ...extra,
  });
/** A rollout's engine process exited on a machine that is otherwise fine. */
export const engineCrashed = (s: number, machineId: string) => fault(s, machineId, { role: 'rollout', handledAs: 'rollout' });
export const observe = (message: ControllerInput, s?: number) => ({
  kind: 'observe' as const,
  message,
  now: s === undefined ? Date.parse(message.occurredAt) : at(s),
});
export const succeeded = (s: number, commandId: string, machineId: string | null, newMachineId?: string) =>
  msg(s, 'RecoveryCommandSucceeded', {
    recoveryId: commandId.slice(0, commandId.lastIndexOf('/')),
    commandId,
    machineId,
    executor: 'spec',
    durationMs: 1000,
    ...(newMachineId ? { newMachineId } : {}),
  });
export const failed = (s: number, commandId: string, machineId: string | null) =>
  msg(s, 'RecoveryCommandFailed', {
    recoveryId: commandId.slice(0, commandId.lastIndexOf('/')),
    commandId,
    machineId,
    executor: 'spec',
    durationMs: 1000,
    error: 'could not start',
  });
export const phase = (s: number, machineId: string) =>
  msg(s, 'RolePhaseChanged', { machineId, role: 'trainer', phase: 'initializing', step: 3, changedAt: iso(s) });

/** An input the controller hears at `s`, whatever its sender's clock wrote on it. */
export const heard = (s: number, message: ControllerInput) => ({ heard: s, message });

/** Feed inputs through the kit's host step, as the service shell does; return every output. */
export function play(history: ControllerEvent[], inputs: Array<ControllerInput | { tick: number } | ReturnType<typeof heard>>, decider = ControllerDecider) {
  const run = DeciderRun.for(decider, published()).given(history);
  for (const input of inputs) {
    if ('tick' in input) run.tick(at(input.tick));
    else if ('heard' in input) run.send(observe(input.message, input.heard));
    else run.send(observe(input));
  }
  return { emitted: run.outputs() as Draft[], state: run.state };
}

export const types = (ds: Draft[]) => ds.map((d) => d.type);
export const decidedOf = (ds: Draft[]) =>
  ds.filter((d): d is Draft<'RecoveryDecided'> => d.type === 'RecoveryDecided').map((d) => [d.data.action, d.data.rule]);
