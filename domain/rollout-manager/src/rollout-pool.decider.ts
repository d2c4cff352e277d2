import { Decider } from '@robustrl/domain-kit';
import { decideRolloutPool } from './rollout-pool.decide';
import { evolveRolloutPool } from './rollout-pool.evolve';
import { initialRolloutPoolState, RolloutPoolCommand, RolloutPoolDraft, RolloutPoolEvent, RolloutPoolState } from './rollout-pool.state';

export * from './rollout-pool.state';

/**
 * The rollout pool of one job (paper §3 RolloutManager, §5.2.2) as a decider: which rollout instances
 * serve, which trajectories each has in flight, and where those go when an instance stops serving —
 * its machine confirmed dead, isolated, or lent to the trainer as warm standby. Trajectories with
 * nowhere to go wait for the next instance to join. State, evolve and the decision steps live in
 * `rollout-pool.state.ts`, `rollout-pool.evolve.ts` and `rollout-pool.decide.ts`.
 *
 * It evolves in place (a job of thousands of machines); the previous, copying pool is kept
 * under `domain/rollout-manager/test/full-recompute/` as the reference `rollout-pool-in-place.spec.ts` holds it to.
 */
export function createRolloutPoolDecider(): Decider<RolloutPoolState, RolloutPoolCommand, RolloutPoolEvent, RolloutPoolDraft> {
  return { initialState: initialRolloutPoolState, decide: decideRolloutPool, evolve: evolveRolloutPool, evolution: 'in-place' };
}

export const RolloutPoolDecider = createRolloutPoolDecider();
