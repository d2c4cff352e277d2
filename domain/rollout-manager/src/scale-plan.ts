import type { RolloutPoolState } from './rollout-pool.state';
import { Trajectories } from './trajectory-table';

export interface ScalePlan {
  /** Serving machines of the zone and class now. */
  current: string[];
  add: number;
  /** Machines to release, least busy first. */
  remove: string[];
}

/**
 * How to bring a zone's serving rollouts of one hardware class to `targetMachines`. Scaling down
 * releases the machines with the fewest trajectories in flight, so the fewest move (each one that
 * does resumes elsewhere from its last stored turn); ties go to the larger machine id so the choice
 * is reproducible.
 */
export function planScale(state: RolloutPoolState, target: { targetMachines: number; zone: string; hardwareClass: string }): ScalePlan {
  const current = Object.values(state.machines)
    .filter((m) => m.status === 'serving' && m.zone === target.zone && m.hardwareClass === target.hardwareClass)
    .map((m) => m.machineId)
    .sort();
  if (target.targetMachines >= current.length) return { current, add: target.targetMachines - current.length, remove: [] };
  const machineOf = (rolloutId: string) => state.instanceMachine[rolloutId] ?? rolloutId.split('/')[0];
  const busy = new Map(current.map((m) => [m, 0]));
  for (const t of Trajectories.all(state.trajectories)) {
    if (!t.owner || (t.status !== 'in-flight' && t.status !== 'reassigned')) continue;
    const m = machineOf(t.owner);
    if (busy.has(m)) busy.set(m, busy.get(m)! + 1);
  }
  const remove = [...current].sort((a, b) => busy.get(a)! - busy.get(b)! || b.localeCompare(a)).slice(0, current.length - target.targetMachines);
  return { current, add: 0, remove };
}
