import { timeline } from '@robustrl/testing/job-timeline';
import { RolloutPoolDecider, RolloutPoolEvent } from './rollout-pool.decider';
import { planScale } from './scale-plan';

const msg = timeline('job-scale');
const register = (machineId: string, zone = 'az-1') =>
  msg(0, 'MachineRegistered', { machineId, role: 'rollout', zone, hardwareClass: 'h100x8', gpus: 8, agentAddress: 'a', dpRank: 0 });
let n = 0;
const turn = (trajectoryId: string, rolloutId: string) =>
  msg(1, 'TrajectoryTurnAppended', {
    trajectoryId,
    batchId: 'b',
    step: 1,
    promptId: 'p',
    sampleIndex: 0,
    turnId: `${trajectoryId}#${++n}`,
    turnIndex: 0,
    kind: 'model-output',
    rolloutId,
    weightVersion: 1,
    tokens: 1,
  });
const state = (events: RolloutPoolEvent[]) => events.reduce(RolloutPoolDecider.evolve, RolloutPoolDecider.initialState());

describe('scale plan', () => {
  const pool = state([register('r-0'), register('r-1'), register('r-2'), register('r-9', 'az-2'), turn('a', 'r-0'), turn('b', 'r-0'), turn('c', 'r-2')]);

  it('adds what is missing in the zone and class', () => {
    expect(planScale(pool, { targetMachines: 5, zone: 'az-1', hardwareClass: 'h100x8' })).toEqual({ current: ['r-0', 'r-1', 'r-2'], add: 2, remove: [] });
  });

  it('releases the least busy machines first, so the fewest trajectories move', () => {
    expect(planScale(pool, { targetMachines: 1, zone: 'az-1', hardwareClass: 'h100x8' }).remove).toEqual(['r-1', 'r-2']);
    expect(planScale(pool, { targetMachines: 0, zone: 'az-1', hardwareClass: 'h100x8' }).remove).toEqual(['r-1', 'r-2', 'r-0']);
  });

  it('leaves other zones alone and does nothing at the target', () => {
    expect(planScale(pool, { targetMachines: 1, zone: 'az-2', hardwareClass: 'h100x8' })).toEqual({ current: ['r-9'], add: 0, remove: [] });
  });
});
