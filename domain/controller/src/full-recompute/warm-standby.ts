import type { ControllerState, RosterMachine } from './controller.state';
import { isSuspected } from '../open-suspicions';

/**
 * Which rollout machine becomes the trainer's warm standby (paper §5.1.3): a healthy rollout in the
 * same zone with the same hardware class as the faulty trainer machine (the paper's prerequisite:
 * same data center, homogeneous machines), one the detector does not suspect before one it does
 * (open-suspicions.ts), and of those the one with the least work in flight, so the fewest
 * trajectories move to other rollouts. Ties go to the smallest machine id, so the choice
 * is reproducible.
 */
export function chooseWarmStandby(state: ControllerState, faulty: RosterMachine, exclude: readonly string[] = []): RosterMachine | null {
  const candidates = Object.values(state.machines).filter(
    (m) =>
      m.status === 'active' &&
      m.role === 'rollout' &&
      m.zone === faulty.zone &&
      m.hardwareClass === faulty.hardwareClass &&
      !exclude.includes(m.machineId) &&
      !machineInActiveRecovery(state, m.machineId),
  );
  // Lost with the faulty trainer (a rack) and not yet confirmed, a rollout is suspected: lent only when
  // every other is too (rollouts idle together between batches, each suspected for a moment).
  const suspected = (m: RosterMachine) => (isSuspected(state.suspicions, m.machineId) ? 1 : 0);
  candidates.sort((a, b) => suspected(a) - suspected(b) || a.inFlightRequests - b.inFlightRequests || a.machineId.localeCompare(b.machineId));
  return candidates[0] ?? null;
}

export function machineInActiveRecovery(state: ControllerState, machineId: string): boolean {
  return Object.values(state.recoveries).some((r) => !r.done && (r.machineId === machineId || r.trainerGroup.includes(machineId)));
}
