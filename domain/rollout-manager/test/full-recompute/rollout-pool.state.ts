/**
 * The rollout pool as it was before it evolved in place: every fold a new state, the machine table
 * copied on every weight version a relay reports. The reference the in-place pool is held to
 * (`rollout-pool-in-place.spec.ts`), spec code only. Its state is the live pool's facts
 * (`RolloutPoolData`) without `stoppedServing`; the records and readers of the facts are the live ones
 * (../../rollout-pool.state.ts). What it keeps of its own is what differs: the copying fold
 * (rollout-pool.evolve.ts) and the decisions on a copy with the input folded in (rollout-pool.decide.ts).
 */
export * from '../../src/rollout-pool.state';
import { PoolMachine, RolloutPoolData } from '../../src/rollout-pool.state';
import { Trajectories } from '../../src/trajectory-table';

/** The facts alone: which machine an input took out of serving is told by comparing the states before and after it. */
export type RolloutPoolState = RolloutPoolData;

export const initialRolloutPoolState = (): RolloutPoolState => ({
  machines: {},
  instanceMachine: {},
  trajectories: Trajectories.empty(),
  orphans: [],
  awaitingRefill: [],
  publishedVersion: null,
});

export function withMachine(state: RolloutPoolState, machine: PoolMachine): RolloutPoolState {
  return { ...state, machines: { ...state.machines, [machine.machineId]: machine } };
}
