import type { DataOf } from '@robustrl/contracts';
import { assertNever } from '@robustrl/domain-kit';
import { agentOf, RolloutPoolEvent, RolloutPoolState, machineOfInstance, servingInstances, stranded, weightsAfterRegistration } from './rollout-pool.state';
import { Trajectories } from './trajectory-table';

/**
 * Folds one event into the pool, in place (a job of thousands of machines cannot copy its
 * machine table for every weight version a relay reports, nor a shard of trajectories for every turn);
 * then, if it made the last serving machine stop serving, keeps what it had in flight as orphans for
 * the next rollout to join. Notes in `stoppedServing` which machine it took out of serving, if any.
 */
export function evolveRolloutPool(state: RolloutPoolState, event: RolloutPoolEvent): RolloutPoolState {
  const machineId = stoppedMachineOf(event);
  const wasServing = machineId !== null && state.machines[machineId]?.status === 'serving';
  state.stoppedServing = null;
  evolveFacts(state, event);
  if (!wasServing || state.machines[machineId!]?.status === 'serving') return state;
  state.stoppedServing = machineId;
  if (servingInstances(state).length === 0) {
    // The event moved no trajectory, so what it left on the machine is what was there before.
    const known = new Set(state.orphans.map((o) => o.trajectoryId));
    for (const lost of stranded(state, machineId!, `rollout ${machineId} stopped serving with no other rollout alive`))
      if (!known.has(lost.trajectoryId)) state.orphans.push(lost);
  }
  return state;
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

function evolveFacts(state: RolloutPoolState, event: RolloutPoolEvent): void {
  switch (event.type) {
    case 'MachineRegistered': {
      if (event.data.role !== 'rollout') return;
      const d = event.data;
      const prior = state.machines[d.machineId];
      state.machines[d.machineId] = {
        machineId: d.machineId,
        zone: d.zone,
        hardwareClass: d.hardwareClass,
        dpRank: d.dpRank,
        status: 'serving',
        lentTo: null,
        weightVersion: weightsAfterRegistration(prior, d),
        weightsTracked: d.weightsAddress !== undefined,
        inferenceUrl: d.inferenceUrl ?? null,
        ...(d.engines ? { engines: d.engines } : {}),
        agent: agentOf(d),
      };
      // Its engines are its instances from the start: work moves to them by their ids, which the router knows.
      // (An engine it no longer lists is no instance of it any more.)
      if (d.engines) {
        const listed = new Set(d.engines.map((e) => e.engineId));
        for (const [id, m] of Object.entries(state.instanceMachine)) if (m === d.machineId && !listed.has(id)) delete state.instanceMachine[id];
        for (const id of listed) state.instanceMachine[id] = d.machineId;
      }
      // The first rollout to join after a lend refills the pool for it.
      if (state.awaitingRefill.length > 0) {
        const lent = state.awaitingRefill.shift()!;
        const lentMachine = state.machines[lent];
        if (lentMachine) lentMachine.lentTo = d.machineId;
      }
      return;
    }
    case 'MachineDeregistered':
    case 'FaultConfirmed': {
      if (event.type === 'FaultConfirmed' && event.data.handledAs !== 'rollout' && event.data.role !== 'rollout') return;
      const machine = state.machines[event.data.machineId];
      if (!machine || machine.status !== 'serving') return;
      machine.status = 'down';
      if (event.type === 'FaultConfirmed' && event.data.evidence.departsAt !== undefined) machine.departsAt = event.data.evidence.departsAt;
      return;
    }
    case 'PromoteRolloutToTrainer': {
      const machine = state.machines[event.data.rolloutMachineId];
      if (!machine || machine.status === 'lent') return;
      machine.status = 'lent';
      state.awaitingRefill.push(machine.machineId);
      return;
    }
    case 'MachineRoleChanged': {
      const machine = state.machines[event.data.machineId];
      if (!machine || event.data.from !== 'rollout' || event.data.to === 'rollout') return;
      if (machine.status === 'serving') machine.status = 'lent';
      return;
    }
    case 'RolloutThroughputSampled':
      state.instanceMachine[event.data.rolloutId] = event.data.machineId;
      return;
    case 'RelayJoined': {
      // An instance that holds a whole version serves it to others (paper §5.2.1 ➂): its machine has it.
      const machine = state.machines[machineOfInstance(state, event.data.instanceId)];
      if (machine && (machine.weightVersion ?? -1) < event.data.version) machine.weightVersion = event.data.version;
      return;
    }
    case 'WeightVersionPublished':
      // The newest, not the highest: a trainer restarted from a checkpoint publishes a lower version again.
      state.publishedVersion = event.data.version;
      return;
    case 'TrajectoryTurnsAppended':
      for (const d of event.data.turns) turnAppended(state, d);
      return;
    case 'TrajectoryTurnAppended':
      turnAppended(state, event.data);
      return;
    case 'TrajectoryStatusChanged': {
      const prior = Trajectories.get(state.trajectories, event.data.trajectoryId);
      if (event.data.status === 'completed' || event.data.status === 'aborted') {
        // Finished trajectories never move again: forget them, so the state is what is in flight (a
        // long job would otherwise keep every trajectory it ever ran).
        if (!prior) return;
        Trajectories.delete(state.trajectories, event.data.trajectoryId);
        if (state.orphans.length > 0) state.orphans = state.orphans.filter((o) => o.trajectoryId !== event.data.trajectoryId);
        return;
      }
      if (prior) prior.status = event.data.status;
      else Trajectories.put(state.trajectories, { trajectoryId: event.data.trajectoryId, owner: null, lastTurnIndex: -1, status: event.data.status });
      return;
    }
    case 'TrajectoriesReassigned': {
      for (const a of event.data.assignments) {
        const prior = Trajectories.get(state.trajectories, a.trajectoryId);
        if (prior) {
          prior.owner = a.toRolloutId;
          prior.status = 'reassigned';
        }
      }
      // Stranded trajectories that found no instance wait as orphans; assigned ones stop being orphans.
      if (state.orphans.length > 0) {
        const assigned = new Set(event.data.assignments.map((a) => a.trajectoryId));
        state.orphans = state.orphans.filter((o) => !assigned.has(o.trajectoryId));
      }
      return;
    }
    default:
      return assertNever(event, 'rollout pool event');
  }
}

/** What one stored turn tells the pool: the trajectory is in flight, and a generated turn names its rollout. */
function turnAppended(state: RolloutPoolState, d: DataOf<'TrajectoryTurnAppended'>): void {
  const prior = Trajectories.get(state.trajectories, d.trajectoryId);
  if (prior) {
    // Model output is what ties a trajectory to the instance generating it.
    if (d.rolloutId !== null && d.rolloutId !== undefined) prior.owner = d.rolloutId;
    prior.lastTurnIndex = Math.max(prior.lastTurnIndex, d.turnIndex);
  } else {
    Trajectories.put(state.trajectories, {
      trajectoryId: d.trajectoryId,
      owner: d.rolloutId ?? null,
      lastTurnIndex: Math.max(-1, d.turnIndex),
      status: 'in-flight',
    });
  }
}
