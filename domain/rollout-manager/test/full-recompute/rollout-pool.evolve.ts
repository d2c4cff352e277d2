/**
 * The copying fold of the full-recompute rollout pool (see rollout-pool.state.ts): every event a new
 * state, the machine table and the trajectory shards copied where they change.
 */
import type { DataOf } from '@robustrl/contracts';
import { assertNever } from '@robustrl/domain-kit';
import { Trajectories } from '../../src/trajectory-table';
import {
  agentOf,
  machineOfInstance,
  PoolTrajectory,
  RolloutPoolEvent,
  RolloutPoolState,
  servingInstances,
  stranded,
  weightsAfterRegistration,
  withMachine,
} from './rollout-pool.state';

/**
 * Folds one event into the pool; then, if it made the last serving machine stop serving, keeps what
 * it had in flight as orphans for the next rollout to join.
 */
export function evolveRolloutPool(state: RolloutPoolState, event: RolloutPoolEvent): RolloutPoolState {
  const after = evolveFacts(state, event);
  const machineId = stoppedMachineOf(event);
  if (
    machineId !== null &&
    state.machines[machineId]?.status === 'serving' &&
    after.machines[machineId]?.status !== 'serving' &&
    servingInstances(after).length === 0
  ) {
    const lost = stranded(state, machineId, `rollout ${machineId} stopped serving with no other rollout alive`);
    return { ...after, orphans: [...after.orphans, ...lost.filter((l) => !after.orphans.some((o) => o.trajectoryId === l.trajectoryId))] };
  }
  return after;
}

/** The machine an event may take out of serving, if it is that kind of event. */
function stoppedMachineOf(event: RolloutPoolEvent): string | null {
  switch (event.type) {
    case 'FaultConfirmed':
    case 'MachineDeregistered':
    case 'MachineRoleChanged':
      return event.data.machineId;
    case 'PromoteRolloutToTrainer':
      return event.data.rolloutMachineId;
    default:
      return null;
  }
}

function evolveFacts(state: RolloutPoolState, event: RolloutPoolEvent): RolloutPoolState {
  switch (event.type) {
    case 'MachineRegistered': {
      if (event.data.role !== 'rollout') return state;
      const d = event.data;
      let next = withMachine(state, {
        machineId: d.machineId,
        zone: d.zone,
        hardwareClass: d.hardwareClass,
        dpRank: d.dpRank,
        status: 'serving',
        lentTo: null,
        weightVersion: weightsAfterRegistration(state.machines[d.machineId], d),
        weightsTracked: d.weightsAddress !== undefined,
        inferenceUrl: d.inferenceUrl ?? null,
        ...(d.engines ? { engines: d.engines } : {}),
        agent: agentOf(d),
      });
      // Its engines are its instances from the start: work moves to them by their ids, which the router knows.
      // (An engine it no longer lists is no instance of it any more.)
      if (d.engines) {
        const listed = new Set(d.engines.map((e) => e.engineId));
        const others = Object.entries(next.instanceMachine).filter(([id, m]) => m !== d.machineId || listed.has(id));
        next = { ...next, instanceMachine: { ...Object.fromEntries(others), ...Object.fromEntries([...listed].map((id) => [id, d.machineId])) } };
      }
      // The first rollout to join after a lend refills the pool for it.
      if (next.awaitingRefill.length > 0) {
        const [lent, ...rest] = next.awaitingRefill;
        const lentMachine = next.machines[lent];
        if (lentMachine) next = withMachine(next, { ...lentMachine, lentTo: d.machineId });
        next = { ...next, awaitingRefill: rest };
      }
      return next;
    }
    case 'MachineDeregistered':
    case 'FaultConfirmed': {
      if (event.type === 'FaultConfirmed' && event.data.handledAs !== 'rollout' && event.data.role !== 'rollout') return state;
      const machine = state.machines[event.data.machineId];
      if (!machine || machine.status !== 'serving') return state;
      const departsAt = event.type === 'FaultConfirmed' ? event.data.evidence.departsAt : undefined;
      return withMachine(state, { ...machine, status: 'down', ...(departsAt !== undefined ? { departsAt } : {}) });
    }
    case 'PromoteRolloutToTrainer': {
      const machine = state.machines[event.data.rolloutMachineId];
      if (!machine || machine.status === 'lent') return state;
      return { ...withMachine(state, { ...machine, status: 'lent' }), awaitingRefill: [...state.awaitingRefill, machine.machineId] };
    }
    case 'MachineRoleChanged': {
      const machine = state.machines[event.data.machineId];
      if (!machine || event.data.from !== 'rollout' || event.data.to === 'rollout') return state;
      return machine.status === 'serving' ? withMachine(state, { ...machine, status: 'lent' }) : state;
    }
    case 'RolloutThroughputSampled':
      return state.instanceMachine[event.data.rolloutId] === event.data.machineId
        ? state
        : { ...state, instanceMachine: { ...state.instanceMachine, [event.data.rolloutId]: event.data.machineId } };
    case 'RelayJoined': {
      // An instance that holds a whole version serves it to others (paper §5.2.1 ➂): its machine has it.
      const machine = state.machines[machineOfInstance(state, event.data.instanceId)];
      if (!machine || (machine.weightVersion ?? -1) >= event.data.version) return state;
      return withMachine(state, { ...machine, weightVersion: event.data.version });
    }
    case 'WeightVersionPublished':
      return { ...state, publishedVersion: event.data.version };
    case 'TrajectoryTurnsAppended':
      return event.data.turns.reduce(turnAppended, state);
    case 'TrajectoryTurnAppended':
      return turnAppended(state, event.data);
    case 'TrajectoryStatusChanged': {
      if (event.data.status === 'completed' || event.data.status === 'aborted') {
        // Finished trajectories never move again: forget them, so the state is what is in flight (a
        // long job would otherwise keep every trajectory it ever ran, and copy them on every event).
        if (!Trajectories.get(state.trajectories, event.data.trajectoryId)) return state;
        const trajectories = Trajectories.remove(state.trajectories, event.data.trajectoryId);
        return { ...state, trajectories, orphans: state.orphans.filter((o) => o.trajectoryId !== event.data.trajectoryId) };
      }
      const prior = Trajectories.get(state.trajectories, event.data.trajectoryId);
      const t: PoolTrajectory = prior
        ? { ...prior, status: event.data.status }
        : { trajectoryId: event.data.trajectoryId, owner: null, lastTurnIndex: -1, status: event.data.status };
      return { ...state, trajectories: Trajectories.set(state.trajectories, t) };
    }
    case 'TrajectoriesReassigned': {
      const moved: PoolTrajectory[] = [];
      for (const a of event.data.assignments) {
        const prior = Trajectories.get(state.trajectories, a.trajectoryId);
        if (prior) moved.push({ ...prior, owner: a.toRolloutId, status: 'reassigned' });
      }
      const trajectories = Trajectories.setMany(state.trajectories, moved);
      // Stranded trajectories that found no instance wait as orphans; assigned ones stop being orphans.
      const assigned = new Set(event.data.assignments.map((a) => a.trajectoryId));
      return { ...state, trajectories, orphans: state.orphans.filter((o) => !assigned.has(o.trajectoryId)) };
    }
    default:
      return assertNever(event, 'rollout pool event');
  }
}

function turnAppended(state: RolloutPoolState, d: DataOf<'TrajectoryTurnAppended'>): RolloutPoolState {
  const prior = Trajectories.get(state.trajectories, d.trajectoryId);
  const t: PoolTrajectory = {
    trajectoryId: d.trajectoryId,
    // Model output is what ties a trajectory to the instance generating it.
    owner: d.rolloutId ?? prior?.owner ?? null,
    lastTurnIndex: Math.max(prior?.lastTurnIndex ?? -1, d.turnIndex),
    status: prior?.status ?? 'in-flight',
  };
  return { ...state, trajectories: Trajectories.set(state.trajectories, t) };
}
