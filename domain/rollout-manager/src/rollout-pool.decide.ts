import { draft } from '@robustrl/contracts';
import { assertNever } from '@robustrl/domain-kit';
import {
  isActive,
  MovingTrajectory,
  RolloutPoolCommand,
  RolloutPoolData,
  RolloutPoolDraft,
  RolloutPoolState,
  servingInstances,
  stranded,
} from './rollout-pool.state';
import { Trajectories } from './trajectory-table';

/**
 * The pool's decisions (paper §5.2.2: a dead rollout's in-flight trajectories continue elsewhere):
 *
 *   stopsServing   — a rollout machine confirmed faulty, gone, lent as warm standby or turned into a
 *                    trainer: its trajectories move to the least loaded living instances
 *   orphansAdopted — a rollout joined, or pulled its first weights, while trajectories had nowhere to
 *                    go: they move to it (a rollout takes work only once it holds weights)
 *
 * A trajectory moves with its preserved prefix: it resumes from the turn after its last stored one.
 *
 * The pool evolves in place: `state` has the input folded in already (`step`).
 */
export function decideRolloutPool(command: RolloutPoolCommand, state: RolloutPoolState): RolloutPoolDraft[] {
  if (command.kind === 'tick') return [];
  const m = command.message;
  switch (m.type) {
    case 'FaultConfirmed':
      return m.data.handledAs === 'rollout' || m.data.role === 'rollout'
        ? stopsServing(state, m.data.machineId, `rollout ${m.data.machineId} confirmed faulty (${m.data.rule})`)
        : [];
    case 'MachineDeregistered':
      return stopsServing(state, m.data.machineId, `rollout ${m.data.machineId} left: ${m.data.reason}`);
    case 'PromoteRolloutToTrainer':
      return stopsServing(
        state,
        m.data.rolloutMachineId,
        `rollout ${m.data.rolloutMachineId} lent to the trainer as warm standby for ${m.data.replacesMachineId}`,
      );
    case 'MachineRoleChanged':
      return m.data.from === 'rollout' && m.data.to !== 'rollout'
        ? stopsServing(state, m.data.machineId, `rollout ${m.data.machineId} became ${m.data.to}: ${m.data.reason}`)
        : [];
    case 'MachineRegistered':
      return m.data.role === 'rollout' && state.orphans.length > 0 ? orphansAdopted(state) : [];
    case 'RelayJoined':
      // A machine's first whole version makes it take work: trajectories waiting for one move to it.
      return state.orphans.length > 0 ? orphansAdopted(state) : [];
    case 'RolloutThroughputSampled':
    case 'TrajectoryTurnAppended':
    case 'TrajectoryTurnsAppended':
    case 'TrajectoryStatusChanged':
    case 'WeightVersionPublished':
      return []; // the picture changes (evolve), nothing moves
    default:
      return assertNever(m, 'rollout pool input');
  }
}

/** Only when this input took the machine out of serving: one that was down or lent already has moved its work. */
function stopsServing(state: RolloutPoolState, machineId: string, reason: string): RolloutPoolDraft[] {
  if (state.stoppedServing !== machineId) return [];
  return assign(state, stranded(state, machineId, reason));
}

/**
 * `state` has the new rollout registered; orphans still in flight go to the serving instances. This and
 * `assign` read the facts only: the full-recompute reference the specs hold the pool to moves with them.
 */
export function orphansAdopted(state: RolloutPoolData): RolloutPoolDraft[] {
  return assign(
    state,
    state.orphans.filter((o) => {
      const t = Trajectories.get(state.trajectories, o.trajectoryId);
      return t !== undefined && isActive(t);
    }),
  );
}

/** Trajectories per serving instance (what is active on it). */
function load(state: RolloutPoolData): Map<string, number> {
  const counts = new Map<string, number>(servingInstances(state).map((i) => [i, 0]));
  for (const t of Trajectories.all(state.trajectories)) if (t.owner && isActive(t) && counts.has(t.owner)) counts.set(t.owner, counts.get(t.owner)! + 1);
  return counts;
}

/** Spread trajectories over the least loaded serving instances, one at a time, so the load stays even. */
export function assign(state: RolloutPoolData, moving: MovingTrajectory[]): RolloutPoolDraft[] {
  const counts = load(state);
  for (const m of moving) counts.delete(m.fromRolloutId);
  if (counts.size === 0 || moving.length === 0) return [];
  const byFrom = new Map<string, { reason: string; assignments: Array<{ trajectoryId: string; toRolloutId: string; resumeFromTurn: number }> }>();
  for (const m of moving) {
    const [toRolloutId] = [...counts.entries()].sort((a, b) => a[1] - b[1] || a[0].localeCompare(b[0]))[0];
    counts.set(toRolloutId, counts.get(toRolloutId)! + 1);
    const t = Trajectories.get(state.trajectories, m.trajectoryId);
    const entry = byFrom.get(m.fromRolloutId) ?? { reason: m.reason, assignments: [] };
    entry.assignments.push({ trajectoryId: m.trajectoryId, toRolloutId, resumeFromTurn: t ? t.lastTurnIndex + 1 : 0 });
    byFrom.set(m.fromRolloutId, entry);
  }
  return [...byFrom.entries()].map(([fromRolloutId, e]) => draft('TrajectoriesReassigned', { fromRolloutId, reason: e.reason, assignments: e.assignments }));
}
