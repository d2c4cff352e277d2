import { DataOf } from '@robustrl/contracts';
import { timeline } from '@robustrl/testing/job-timeline';
import { RolloutPoolDecider } from './rollout-pool.decider';
import { RolloutPoolEvent } from './rollout-pool.state';
import { evolveRolloutPool as evolveByCopy } from '../test/full-recompute/rollout-pool.evolve';

const msg = timeline('job-notices');
const register = (machineId: string) =>
  msg(0, 'MachineRegistered', { machineId, role: 'rollout', zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: `${machineId}:8086`, dpRank: 0 });
const turnData = (trajectoryId: string, turnIndex: number, rolloutId: string | null): DataOf<'TrajectoryTurnAppended'> => ({
  trajectoryId,
  batchId: 'b-1',
  step: 1,
  promptId: trajectoryId.split('/')[0],
  sampleIndex: 0,
  turnId: `${trajectoryId}#${turnIndex}`,
  turnIndex,
  kind: 'model-output',
  rolloutId,
  weightVersion: 1,
  tokens: 16,
});

/** TrajectoryTurnsAppended (many turns in one record, the router's store) tells the pool what its turns one by one would. */
describe('rollout pool: turns announced many per record', () => {
  const turns = [turnData('p1/0', 0, 'r-0'), turnData('p2/0', 0, 'r-1'), turnData('p1/0', 4, 'r-1')];
  const oneByOne: RolloutPoolEvent[] = [register('r-0'), register('r-1'), ...turns.map((t, i) => msg(1 + i, 'TrajectoryTurnAppended', t))];
  const together: RolloutPoolEvent[] = [register('r-0'), register('r-1'), msg(1, 'TrajectoryTurnsAppended', { turns })];
  const fold = (events: RolloutPoolEvent[]) => events.reduce(RolloutPoolDecider.evolve, RolloutPoolDecider.initialState());

  it('owners and last turns as if each turn came alone, in place and by copy', () => {
    const byOne = fold(oneByOne);
    const byRecord = fold(together);
    expect(byRecord.trajectories).toEqual(byOne.trajectories);
    expect([...Object.values(byRecord.trajectories)].length).toBeGreaterThan(0);
    const copied = together.reduce(evolveByCopy, RolloutPoolDecider.initialState());
    expect(copied.trajectories).toEqual(byOne.trajectories);
  });

  it('moves nothing by itself: the pool decides nothing on it', () => {
    const state = fold(together.slice(0, 2));
    expect(RolloutPoolDecider.decide({ kind: 'observe', message: together[2] as never, now: 1 }, state)).toEqual([]);
  });
});
