import { foldInput } from '@robustrl/domain-kit';
import { timeline } from '@robustrl/testing/job-timeline';
import { RolloutPoolDecider, RolloutPoolEvent, RolloutPoolInput } from './rollout-pool.decider';
import { machineOfInstance, servingInstances } from './rollout-pool.state';

/** A machine hosting several engines (docs/integrators/engines.md): the pool addresses engines; faults stay per machine. */
const msg = timeline('job-engines');
const observe = (message: RolloutPoolInput) => ({ kind: 'observe' as const, message, now: Date.parse(message.occurredAt) });
const d = RolloutPoolDecider;
const fold = (history: RolloutPoolInput[]) => history.reduce((s, m) => d.evolve(s, m as RolloutPoolEvent), d.initialState());
const decideAfter = (history: RolloutPoolInput[], message: RolloutPoolInput) => d.decide(observe(message), foldInput(d, fold(history), observe(message)));

const register = (machineId: string, engines?: string[]) =>
  msg(0, 'MachineRegistered', {
    machineId,
    role: 'rollout',
    zone: 'az-1',
    hardwareClass: 'h100x8',
    gpus: 8,
    agentAddress: `${machineId}:8086`,
    dpRank: 0,
    ...(engines ? { engines: engines.map((e, i) => ({ engineId: `${machineId}/${e}`, url: `http://${machineId}:${8000 + i}` })) } : {}),
  });
let turnNo = 0;
const turn = (trajectoryId: string, rolloutId: string) =>
  msg(1, 'TrajectoryTurnAppended', {
    trajectoryId,
    batchId: 'b-1',
    step: 1,
    promptId: trajectoryId.split('/')[0],
    sampleIndex: 0,
    turnId: `${trajectoryId}#${++turnNo}`,
    turnIndex: 0,
    kind: 'model-output',
    rolloutId,
    weightVersion: 0,
    tokens: 10,
  });
const fault = (machineId: string) =>
  msg(5, 'FaultConfirmed', {
    verdictId: `${machineId}/v`,
    machineId,
    role: 'rollout',
    rule: 'rollout-silent',
    handledAs: 'rollout',
    machineFaulty: true,
    detectionLatencyMs: 1,
    evidence: {},
  });

describe('rollout pool: a machine hosting several engines', () => {
  it('serves under each engine id from its registration on, each mapped to its machine', () => {
    const state = fold([register('n1', ['a', 'b']), register('n2')]);
    expect(servingInstances(state)).toEqual(['n1/a', 'n1/b', 'n2']);
    expect(machineOfInstance(state, 'n1/b')).toBe('n1');
  });

  it("a machine's fault moves the work of every engine on it, to engines elsewhere only", () => {
    const history = [register('n1', ['a', 'b']), register('n2', ['a', 'b']), turn('p1/0', 'n1/a'), turn('p2/0', 'n1/b'), turn('p3/0', 'n1/b')];
    const decided = decideAfter(history, fault('n1'));
    const moves = decided.flatMap((e) =>
      e.type === 'TrajectoriesReassigned' ? e.data.assignments.map((a) => [e.data.fromRolloutId, a.trajectoryId, a.toRolloutId]) : [],
    );
    expect(moves.map(([from, t]) => `${from}:${t}`).sort()).toEqual(['n1/a:p1/0', 'n1/b:p2/0', 'n1/b:p3/0']);
    for (const [, , to] of moves) expect(to).toMatch(/^n2\/[ab]$/);
  });

  it('an engine its machine no longer lists is no instance any more', () => {
    const state = fold([register('n1', ['a', 'b']), register('n1', ['a'])]);
    expect(servingInstances(state)).toEqual(['n1/a']);
  });
});
