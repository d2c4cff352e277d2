import { DeciderSpecification, foldInput } from '@robustrl/domain-kit';
import { DataOf, Draft, draft } from '@robustrl/contracts';
import { iso, timeline } from '@robustrl/testing/job-timeline';
import { RolloutPoolDecider, RolloutPoolDraft, RolloutPoolEvent, RolloutPoolInput } from './rollout-pool.decider';

const msg = timeline('job-pool');
const spec = DeciderSpecification.for(RolloutPoolDecider);
const eq = (actual: Draft[], expected: readonly Draft[]) => expect(actual).toEqual(expected);
const observe = (message: RolloutPoolInput) => ({ kind: 'observe' as const, message, now: Date.parse(message.occurredAt) });
/** What the pool decides on `message` after `history` (it evolves in place: the input is folded before deciding). */
const decideAfter = (history: RolloutPoolEvent[], message: RolloutPoolInput) => {
  const d = RolloutPoolDecider;
  return d.decide(observe(message), foldInput(d, history.reduce(d.evolve, d.initialState()), observe(message)));
};

const register = (machineId: string, s = 0, role: 'rollout' | 'trainer' = 'rollout') =>
  msg(s, 'MachineRegistered', { machineId, role, zone: 'az-1', hardwareClass: 'h100x8', gpus: 8, agentAddress: `${machineId}:8086`, dpRank: 0 });
let turnNo = 0;
const turn = (
  s: number,
  trajectoryId: string,
  turnIndex: number,
  rolloutId: string | null,
  kind: 'model-output' | 'tool-call' | 'tool-result' = 'model-output',
) =>
  msg(s, 'TrajectoryTurnAppended', {
    trajectoryId,
    batchId: 'b-3',
    step: 3,
    promptId: trajectoryId.split('/')[0],
    sampleIndex: 0,
    turnId: `${trajectoryId}#${turnIndex}#${++turnNo}`,
    turnIndex,
    kind,
    rolloutId,
    weightVersion: 3,
    tokens: 100,
  });
const completed = (s: number, trajectoryId: string) =>
  msg(s, 'TrajectoryStatusChanged', { trajectoryId, batchId: 'b-3', step: 3, promptId: trajectoryId.split('/')[0], sampleIndex: 0, status: 'completed' });
const fault = (s: number, machineId: string) =>
  msg(s, 'FaultConfirmed', {
    verdictId: `${machineId}/v`,
    machineId,
    role: 'rollout',
    rule: 'rollout-silent',
    handledAs: 'rollout',
    machineFaulty: true,
    detectionLatencyMs: 70_000,
    evidence: {},
  });

/** Three rollouts; r-0 runs p1 (waiting on a tool after 3 turns), p2 (2 turns), and p3 (completed). */
const pool = () => [
  register('r-0'),
  register('r-1'),
  register('r-2'),
  turn(1, 'p1/0', 0, 'r-0'),
  turn(2, 'p1/0', 1, null, 'tool-call'),
  turn(3, 'p1/0', 2, null, 'tool-result'),
  turn(1, 'p2/0', 0, 'r-0'),
  turn(2, 'p2/0', 1, 'r-0'),
  turn(1, 'p3/0', 0, 'r-0'),
  completed(2, 'p3/0'),
  turn(1, 'p4/0', 0, 'r-1'),
];

describe('rollout pool: a rollout that stops serving hands its in-flight trajectories over', () => {
  it('moves them to the least loaded living rollouts, resuming after their last stored turn; completed ones stay', () => {
    spec
      .given(pool())
      .when(observe(fault(10, 'r-0')))
      .then(
        [
          draft('TrajectoriesReassigned', {
            fromRolloutId: 'r-0',
            reason: 'rollout r-0 confirmed faulty (rollout-silent)',
            assignments: [
              { trajectoryId: 'p1/0', toRolloutId: 'r-2', resumeFromTurn: 3 },
              { trajectoryId: 'p2/0', toRolloutId: 'r-1', resumeFromTurn: 2 },
            ],
          }),
        ],
        eq,
      );
  });

  it('a rollout lent to the trainer as warm standby hands over the same way, and the pool tracks its refill', () => {
    const promote = msg(10, 'PromoteRolloutToTrainer', { recoveryId: 't/rec', commandId: 't/rec/1', rolloutMachineId: 'r-0', replacesMachineId: 'trainer-1' });
    spec
      .given(pool())
      .when(observe(promote))
      .then(
        [
          expect.objectContaining({
            type: 'TrajectoriesReassigned',
            data: expect.objectContaining({ fromRolloutId: 'r-0', reason: expect.stringMatching(/lent to the trainer as warm standby for trainer-1/) }),
          }) as unknown as RolloutPoolDraft,
        ],
        eq,
      );
    const d = RolloutPoolDecider;
    const state = [...pool(), promote, register('r-9', 20)].reduce(d.evolve, d.initialState());
    expect(state.machines['r-0']).toMatchObject({ status: 'lent', lentTo: 'r-9' });
    expect(state.awaitingRefill).toEqual([]);
  });

  it('decides nothing twice: a redelivered verdict finds the machine already down', () => {
    const first = decideAfter(pool(), fault(10, 'r-0'));
    const history: RolloutPoolEvent[] = [...pool(), fault(10, 'r-0'), ...first.map((x) => ({ ...x, occurredAt: iso(10) }) as unknown as RolloutPoolEvent)];
    spec
      .given(history)
      .when(observe(fault(11, 'r-0')))
      .thenNothingHappened(eq);
  });

  it('with no rollout alive the trajectories wait, and go to the next rollout that joins', () => {
    const lonely = [register('r-0'), turn(1, 'p1/0', 0, 'r-0'), turn(2, 'p1/0', 1, null, 'tool-call')];
    spec
      .given(lonely)
      .when(observe(fault(10, 'r-0')))
      .thenNothingHappened(eq);
    spec
      .given([...lonely, fault(10, 'r-0')])
      .when(observe(register('r-7', 30)))
      .then(
        [
          draft('TrajectoriesReassigned', {
            fromRolloutId: 'r-0',
            reason: 'rollout r-0 stopped serving with no other rollout alive',
            assignments: [{ trajectoryId: 'p1/0', toRolloutId: 'r-7', resumeFromTurn: 2 }],
          }),
        ],
        eq,
      );
  });

  it("knows a machine's instances (one per DP rank) from throughput samples", () => {
    const ranks = [
      register('m-0'),
      register('m-1'),
      msg(0, 'RolloutThroughputSampled', {
        machineId: 'm-0',
        rolloutId: 'm-0/dp0',
        sampledAt: iso(0),
        windowSeconds: 10,
        tokensPerSecond: 1,
        completedRequests: 0,
        inFlightRequests: 1,
        awaitingTools: 0,
      }),
      msg(0, 'RolloutThroughputSampled', {
        machineId: 'm-0',
        rolloutId: 'm-0/dp1',
        sampledAt: iso(0),
        windowSeconds: 10,
        tokensPerSecond: 1,
        completedRequests: 0,
        inFlightRequests: 1,
        awaitingTools: 0,
      }),
      msg(0, 'RolloutThroughputSampled', {
        machineId: 'm-1',
        rolloutId: 'm-1/dp0',
        sampledAt: iso(0),
        windowSeconds: 10,
        tokensPerSecond: 1,
        completedRequests: 0,
        inFlightRequests: 1,
        awaitingTools: 0,
      }),
      turn(1, 'a/0', 0, 'm-0/dp0'),
      turn(1, 'b/0', 0, 'm-0/dp1'),
    ];
    const out = decideAfter(ranks, fault(10, 'm-0'));
    expect(
      out.map((o) => [
        o.type,
        (o.data as { fromRolloutId: string }).fromRolloutId,
        (o.data as { assignments: Array<{ toRolloutId: string }> }).assignments.map((a) => a.toRolloutId),
      ]),
    ).toEqual([
      ['TrajectoriesReassigned', 'm-0/dp0', ['m-1/dp0']],
      ['TrajectoriesReassigned', 'm-0/dp1', ['m-1/dp0']],
    ]);
  });

  it('records the weight version each machine holds, from the relays it joins', () => {
    const d = RolloutPoolDecider;
    const state = [
      ...pool(),
      msg(5, 'RelayJoined', { instanceId: 'r-1', version: 4, address: 'r-1:9000' }),
      msg(6, 'RelayJoined', { instanceId: 'r-1', version: 3, address: 'r-1:9000' }),
    ].reduce(d.evolve, d.initialState());
    expect(state.machines['r-1'].weightVersion).toBe(4);
    expect(state.machines['r-0'].weightVersion).toBeNull();
  });

  it('a trainer fault moves nothing', () => {
    const trainerFault = msg(10, 'FaultConfirmed', {
      verdictId: 't/v',
      machineId: 'trainer-0',
      role: 'trainer',
      rule: 'explicit-signal',
      handledAs: 'trainer',
      machineFaulty: false,
      detectionLatencyMs: 0,
      evidence: {},
    });
    spec
      .given([...pool(), register('trainer-0', 0, 'trainer')])
      .when(observe(trainerFault))
      .thenNothingHappened(eq);
  });
});

describe('rollout pool: a rollout takes work only once it holds weights', () => {
  /** A machine with a weight server: its holdings are known from the relays it joins. */
  const withWeights = (machineId: string, s = 0) =>
    msg(s, 'MachineRegistered', {
      machineId,
      role: 'rollout',
      zone: 'az-1',
      hardwareClass: 'h100x8',
      gpus: 8,
      agentAddress: `${machineId}:8086`,
      dpRank: 0,
      weightsAddress: `${machineId}:13337`,
      inferenceUrl: `http://${machineId}:8000`,
    });
  const published = (s: number, version: number) => msg(s, 'WeightVersionPublished', { version, step: version, buckets: [], totalBytes: 0, sources: [] });
  const relay = (s: number, machineId: string, version: number) => msg(s, 'RelayJoined', { instanceId: machineId, version, address: `${machineId}:13337` });
  /** r-0 and r-1 hold version 3; r-0 runs p1. */
  const running = () => [withWeights('r-0'), withWeights('r-1'), published(1, 3), relay(2, 'r-0', 3), relay(2, 'r-1', 3), turn(3, 'p1/0', 0, 'r-0')];

  it('a replacement that joined but pulled nothing yet gets none of a dead rollout’s trajectories', () => {
    // The failing case on main: r-2 registered at 5 and was handed p1 before it held any weights.
    const fresh = [...running(), fault(4, 'r-1'), withWeights('r-2', 5)];
    const out = decideAfter(fresh, fault(10, 'r-0'));
    expect(out).toEqual([]);
    const d = RolloutPoolDecider;
    const state = [...fresh, fault(10, 'r-0')].reduce(d.evolve, d.initialState());
    expect(state.orphans.map((o) => o.trajectoryId)).toEqual(['p1/0']);
  });

  it('its first whole version makes it take the trajectories that waited', () => {
    const waiting = [...running(), fault(4, 'r-1'), withWeights('r-2', 5), fault(10, 'r-0')];
    spec
      .given(waiting)
      .when(observe(relay(20, 'r-2', 3)))
      .then(
        [
          draft('TrajectoriesReassigned', {
            fromRolloutId: 'r-0',
            reason: 'rollout r-0 stopped serving with no other rollout alive',
            assignments: [{ trajectoryId: 'p1/0', toRolloutId: 'r-2', resumeFromTurn: 1 }],
          }),
        ],
        eq,
      );
  });

  it('a rollout with weights takes them over at once, past a fresh one', () => {
    const out = decideAfter([...running(), withWeights('r-2', 5)], fault(10, 'r-0'));
    expect(out.flatMap((o) => (o.data as { assignments: Array<{ toRolloutId: string }> }).assignments.map((a) => a.toRolloutId))).toEqual(['r-1']);
  });

  it('before any version is published, and for a machine outside weight transfer, serving is enough', () => {
    const d = RolloutPoolDecider;
    const early = [withWeights('r-0'), withWeights('r-1'), turn(3, 'p1/0', 0, 'r-0')];
    expect(decideAfter(early, fault(10, 'r-0'))).toHaveLength(1);
    // register() has no weight server: the control plane cannot see its weights, so it is not held back.
    const untracked = [...running(), register('r-5', 4)];
    expect(decideAfter([...untracked, fault(5, 'r-1')], fault(10, 'r-0'))).toHaveLength(1);
    expect([...untracked].reduce(d.evolve, d.initialState()).machines['r-5']).toMatchObject({ weightsTracked: false, inferenceUrl: null });
  });

  it('the same agent registering again (its engine restarted in place) keeps its weights, a new agent process holds none, as the registry decides', () => {
    const d = RolloutPoolDecider;
    const state = [...running(), withWeights('r-0', 8)].reduce(d.evolve, d.initialState());
    expect(state.machines['r-0']).toMatchObject({ status: 'serving', weightVersion: 3, inferenceUrl: 'http://r-0:8000' });
    // A task restart: the machine's agent process restarted and registers before any verdict saw it go.
    const restarted = msg(8, 'MachineRegistered', { ...(withWeights('r-0', 8).data as DataOf<'MachineRegistered'>), incarnation: 'b' });
    const fresh = [...running(), restarted].reduce(d.evolve, d.initialState());
    expect(fresh.machines['r-0']).toMatchObject({ status: 'serving', weightVersion: null });
    const back = [...running(), fault(5, 'r-0'), withWeights('r-0', 8)].reduce(d.evolve, d.initialState());
    expect(back.machines['r-0']).toMatchObject({ status: 'serving', weightVersion: null });
  });
});
