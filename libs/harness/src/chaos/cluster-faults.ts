import type { MessageOf } from '@robustrl/contracts';
import { completedRecovery, recoveryFor, rolesOf } from './campaign-view';
import type { FaultHost, Injection } from './fault-host';
import { killRoleProcess, machinesWithRoleProcess, runningMachines } from './fault-host';
import type { ScheduledFault } from './fault-schedule';
import { pickOf } from './fault-schedule';

/**
 * Faults as clusters have them (DESIGN §Recovery): several machines at once, and faults that land while
 * a recovery is open — the cases the control plane must re-plan at once instead of waiting out a command
 * timeout, retire a machine instead of restarting it forever, or escalate by the paper's rules 2 and 3.
 */
export const CLUSTER_FAULTS = ['rack', 'second-trainer-fault-in-step', 'flapping-trainer', 'machines-lost-during-recovery'] as const;
export type ClusterFault = (typeof CLUSTER_FAULTS)[number];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** How long a recovery step may take to show on the bus before the fault gives up on it (a machine replacement on two loaded cores). */
const STEP_WAIT_MS = 90_000;

export function clusterFault(host: FaultHost, fault: ScheduledFault): Promise<Injection> {
  switch (fault.kind as ClusterFault) {
    case 'rack':
      return rack(host, fault);
    case 'second-trainer-fault-in-step':
      return secondTrainerFaultInStep(host, fault);
    case 'flapping-trainer':
      return flappingTrainer(host, fault);
    case 'machines-lost-during-recovery':
      return machinesLostDuringRecovery(host, fault);
  }
}

/** A rack (or its switch) lost: a trainer machine and one or two rollout machines killed together. */
async function rack(host: FaultHost, fault: ScheduledFault): Promise<Injection> {
  const trainer = pickOf(runningMachines(host, 'trainer'), fault.pick);
  const rollouts = runningMachines(host, 'rollout');
  if (!trainer || rollouts.length < 2) return { target: 'none', note: 'no trainer and two rollouts running' };
  // One or two rollouts, never all of them: a warm standby must be left to lend.
  const size = Math.min(rollouts.length - 1, fault.downSeconds > 4 ? 2 : 1);
  const start = Math.floor(fault.pick * rollouts.length);
  const lost = [trainer, ...Array.from({ length: size }, (_, i) => rollouts[(start + i) % rollouts.length])];
  for (const machineId of lost) host.supervisor.killMachine(machineId, 'SIGKILL');
  return { target: lost.join('+'), note: `${lost.length} machines at once` };
}

/**
 * A trainer process killed, and a trainer process killed again the moment that recovery completed,
 * before the retried step commits: a second trainer fault in one step, which the paper's rule 2 takes
 * for a reproducible one (the task restarts).
 */
async function secondTrainerFaultInStep(host: FaultHost, fault: ScheduledFault): Promise<Injection> {
  const first = pickOf(machinesWithRoleProcess(host, 'trainer'), fault.pick);
  if (!first) return { target: 'none', note: 'no trainer with a running process' };
  const since = Date.now() - 1_000;
  killRoleProcess(host, first);
  const recovery = await host.until('the first recovery decided', () => recoveryFor(host.events(), first, since), STEP_WAIT_MS, 100).catch(() => undefined);
  if (!recovery) return { target: first, note: 'no recovery decided for the first kill: no second fault' };
  const done = await host
    .until('the first recovery completed', () => completedRecovery(host.events(), recovery.recoveryId), STEP_WAIT_MS, 50)
    .catch(() => false);
  if (!done) return { target: first, note: `${recovery.recoveryId} did not complete: no second fault` };
  const second = await host
    .until('a trainer process running again', () => pickOf(machinesWithRoleProcess(host, 'trainer'), 1 - fault.pick), 30_000, 50)
    .catch(() => undefined);
  if (!second) return { target: first, note: 'no trainer process came back: no second fault' };
  killRoleProcess(host, second);
  return { target: `${first}, then ${second}`, note: `second kill as ${recovery.recoveryId} completed (step ${recovery.step})` };
}

/**
 * A machine whose trainer fails on every restart: its trainer process is killed, and killed again each
 * time its recovery completes, until the controller stops restarting it there (the machine retired, or
 * the kills run out). The note counts the kills and says how it ended.
 */
async function flappingTrainer(host: FaultHost, fault: ScheduledFault): Promise<Injection> {
  const target = pickOf(machinesWithRoleProcess(host, 'trainer'), fault.pick);
  if (!target) return { target: 'none', note: 'no trainer with a running process' };
  const MAX_KILLS = 5;
  let kills = 0;
  for (;;) {
    const since = Date.now() - 1_000;
    killRoleProcess(host, target);
    kills++;
    const recovery = await host.until(`a recovery for ${target}`, () => recoveryFor(host.events(), target, since), STEP_WAIT_MS, 100).catch(() => undefined);
    if (!recovery) return { target, note: `${kills} kill(s); the last got no recovery within ${STEP_WAIT_MS / 1000} s` };
    if (recovery.action !== 'restart-trainer-group' && recovery.action !== 'restart-task')
      return { target, note: `${kills} kill(s); then ${recovery.action} (${recovery.rule}): no longer restarted there` };
    if (kills >= MAX_KILLS) return { target, note: `${kills} kill(s), each restarted (${recovery.rule} last): the budget never retired it` };
    const done = await host
      .until(`${recovery.recoveryId} completed`, () => completedRecovery(host.events(), recovery.recoveryId), STEP_WAIT_MS, 100)
      .catch(() => false);
    if (!done) return { target, note: `${kills} kill(s); ${recovery.recoveryId} did not complete` };
    // Its trainer back and still a trainer: the next failure.
    const back = await host
      .until(
        `${target} training again`,
        () => rolesOf(host.events()).get(target) === 'trainer' && machinesWithRoleProcess(host, 'trainer').includes(target),
        60_000,
        100,
      )
      .catch(() => false);
    if (!back) return { target, note: `${kills} kill(s); ${target} did not come back as a trainer` };
    await sleep(1_000);
  }
}

/**
 * A trainer process killed and, the same instant, its peer's machine lost: the group restart waits on a
 * dead machine and fails at its verdict; while that machine's warm standby is promoted, the standby's
 * machine is lost too. Two restarts of one recovery fail: the paper's rule 3 escalates to a task restart.
 */
async function machinesLostDuringRecovery(host: FaultHost, fault: ScheduledFault): Promise<Injection> {
  const trainers = machinesWithRoleProcess(host, 'trainer');
  const first = pickOf(trainers, fault.pick);
  const peer = trainers.find((id) => id !== first);
  if (!first || !peer) return { target: 'none', note: 'fewer than two trainers with a running process' };
  const since = Date.now() - 1_000;
  killRoleProcess(host, first);
  host.supervisor.killMachine(peer, 'SIGKILL');
  const recovery = await host.until('the restart decided', () => recoveryFor(host.events(), first, since), STEP_WAIT_MS, 50).catch(() => undefined);
  if (!recovery) return { target: `${first}, ${peer}`, note: 'no recovery decided for the first kill' };
  const promoted = await host
    .until(
      'a standby promoted',
      () =>
        host.events().find((m): m is MessageOf<'PromoteRolloutToTrainer'> => m.type === 'PromoteRolloutToTrainer' && m.data.recoveryId === recovery.recoveryId)
          ?.data.rolloutMachineId,
      STEP_WAIT_MS,
      20,
    )
    .catch(() => undefined);
  if (!promoted) return { target: `${first}, ${peer}`, note: `no standby promoted in ${recovery.recoveryId}: the standby was not lost` };
  host.supervisor.killMachine(promoted, 'SIGKILL');
  return { target: `${first}, ${peer}, ${promoted}`, note: `in ${recovery.recoveryId}: ${peer} lost as its group restarted, then the standby ${promoted}` };
}
