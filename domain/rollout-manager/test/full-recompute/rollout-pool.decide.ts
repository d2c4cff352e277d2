/**
 * The rollout pool's decisions as the copying pool makes them: the same steps as the live
 * rollout-pool.decide.ts, on the state before the input. A machine stops serving by this input when it
 * serves before it; orphans are adopted on a copy with the input folded in (this folder's evolve). How
 * trajectories move (`orphansAdopted`, `assign`) is the live pool's own.
 */
import { assertNever } from '@robustrl/domain-kit';
import { assign, orphansAdopted } from '../../src/rollout-pool.decide';
import { evolveRolloutPool } from './rollout-pool.evolve';
import { RolloutPoolCommand, RolloutPoolDraft, RolloutPoolState, stranded, withMachine } from './rollout-pool.state';

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
      return m.data.role === 'rollout' && state.orphans.length > 0 ? orphansAdopted(evolveRolloutPool(state, m)) : [];
    case 'RelayJoined':
      // A machine's first whole version makes it take work: trajectories waiting for one move to it.
      return state.orphans.length > 0 ? orphansAdopted(evolveRolloutPool(state, m)) : [];
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

/** Only when the machine serves before this input: one that was down or lent already has moved its work. */
function stopsServing(state: RolloutPoolState, machineId: string, reason: string): RolloutPoolDraft[] {
  const machine = state.machines[machineId];
  if (!machine || machine.status !== 'serving') return [];
  const after = withMachine(state, { ...machine, status: 'down' });
  return assign(after, stranded(state, machineId, reason));
}
