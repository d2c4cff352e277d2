import type { ControllerData, ControllerState, RosterMachine } from './controller.state';
import { isSuspected } from './open-suspicions';

/**
 * Which rollout machine becomes the trainer's warm standby (paper §5.1.3): a healthy rollout in the
 * same zone with the same hardware class as the faulty trainer machine (the paper's prerequisite:
 * same data center, homogeneous machines), one the detector does not suspect before one it does
 * (open-suspicions.ts), and of those the one with the least work in flight, so the fewest
 * trajectories move to other rollouts. Ties go to the smallest machine id, so the choice
 * is reproducible.
 */
export function chooseWarmStandby(state: ControllerState, faulty: RosterMachine, exclude: readonly string[] = []): RosterMachine | null {
  // Gathered once: asking per candidate walked every open recovery's trainer group once per rollout.
  return warmStandbyAmong(state, faulty, machinesInActiveRecoveries(state), exclude);
}

/**
 * The choice above, given `busy`: every machine an unfinished recovery is about or is rebuilding the
 * trainer group with (never lent). Reads the facts only, so the full-recompute reference the specs hold
 * the controller to chooses with it, gathering `busy` its own way.
 */
export function warmStandbyAmong(
  state: ControllerData,
  faulty: RosterMachine,
  busy: ReadonlySet<string>,
  exclude: readonly string[] = [],
): RosterMachine | null {
  const candidates = Object.values(state.machines).filter(
    (m) =>
      m.status === 'active' &&
      m.role === 'rollout' &&
      m.zone === faulty.zone &&
      m.hardwareClass === faulty.hardwareClass &&
      !exclude.includes(m.machineId) &&
      !busy.has(m.machineId),
  );
  // Lost with the faulty trainer (a rack) and not yet confirmed, a rollout is suspected: lent only when
  // every other is too (rollouts idle together between batches, each suspected for a moment).
  const suspected = (m: RosterMachine) => (isSuspected(state.suspicions, m.machineId) ? 1 : 0);
  candidates.sort((a, b) => suspected(a) - suspected(b) || a.inFlightRequests - b.inFlightRequests || a.machineId.localeCompare(b.machineId));
  return candidates[0] ?? null;
}

export function machineInActiveRecovery(state: ControllerState, machineId: string): boolean {
  return machinesInActiveRecoveries(state).has(machineId);
}

/** Every machine an unfinished recovery is about or is rebuilding the trainer group with. */
function machinesInActiveRecoveries(state: ControllerState): Set<string> {
  const busy = new Set<string>();
  for (const id of state.index.open) {
    const r = state.recoveries[id];
    busy.add(r.machineId);
    for (const m of r.trainerGroup) busy.add(m);
  }
  return busy;
}
