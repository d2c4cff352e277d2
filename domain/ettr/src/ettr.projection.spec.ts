import { createMessage, DataOf, MessageType } from '@robustrl/contracts';
import { ProjectionSpecification } from '@robustrl/domain-kit';
import { createEttrProjection, EttrInput } from './ettr.projection';
import { downtimeBy, downtimeLedger, describeDowntime, ettrOf, ettrReport, slidingEttr } from './ettr-report';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
/** A message of job-1 at `seconds` after T0. */
function at<T extends MessageType>(seconds: number, type: T, data: DataOf<T>): EttrInput {
  return createMessage(type, data, { jobId: 'job-1', source: 'spec', occurredAt: new Date(T0 + seconds * 1000).toISOString() }) as unknown as EttrInput;
}
const iso = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();

const registered = (s: number, machineId: string, role: 'trainer' | 'rollout', gpus = 8) =>
  at(s, 'MachineRegistered', { machineId, role, zone: 'z', hardwareClass: 'h20', gpus, agentAddress: `http://${machineId}`, dpRank: null });
const phase = (s: number, machineId: string, role: 'trainer' | 'rollout', p: DataOf<'RolePhaseChanged'>['phase'], step = 0) =>
  at(s, 'RolePhaseChanged', { machineId, role, phase: p, step, changedAt: iso(s) });
const started = (mode: 'sync' | 'semi-sync' | 'async' = 'semi-sync') =>
  at(0, 'JobStarted', { mode, resumedFromStep: null, trainerMachines: 1, rolloutMachines: 3 });
const trainerFault = (s: number, latencyMs = 0, verdictId = 't0/explicit-signal/1') =>
  at(s, 'FaultConfirmed', {
    verdictId,
    machineId: 't0',
    role: 'trainer',
    rule: 'explicit-signal',
    evidence: {},
    handledAs: 'trainer',
    machineFaulty: false,
    detectionLatencyMs: latencyMs,
  });
/** A rollout machine confirmed faulty by `rule` (a machine lost: replaced, not restarted in place). */
const rolloutLost = (s: number, verdictId: string, machineId: string, rule: string, detectionLatencyMs = 0) =>
  at(s, 'FaultConfirmed', { verdictId, machineId, role: 'rollout', rule, evidence: {}, handledAs: 'rollout', machineFaulty: true, detectionLatencyMs });
const decided = (
  s: number,
  verdictId: string,
  machineId: string,
  action: DataOf<'RecoveryDecided'>['action'],
  rule: DataOf<'RecoveryDecided'>['rule'] = 'trainer-fault',
) => at(s, 'RecoveryDecided', { recoveryId: `${verdictId}/recovery`, verdictId, machineId, action, rule, step: 0, evidence: {} });
const restartGroup = (s: number, verdictId: string) =>
  at(s, 'RestartTrainerGroup', {
    recoveryId: `${verdictId}/recovery`,
    commandId: `${verdictId}/recovery/1`,
    machines: ['t0'],
    step: 0,
    checkpointStep: null,
    keepBatch: true,
  });
/** Something that only moves time forward (the projection ignores the data). */
const tick = (s: number) => at(s, 'TrainingStepStarted', { step: 99, batchId: 'b-tick', startedAt: iso(s) });

/** One trainer machine and three rollout machines, 8 GPUs each, working from t=0 (no startup). */
const workingJob = (mode: 'sync' | 'semi-sync' | 'async' = 'semi-sync', rolloutPhase: 'rollout' | 'idle' = 'rollout') => [
  started(mode),
  registered(0, 't0', 'trainer'),
  ...['r1', 'r2', 'r3'].map((r) => registered(0, r, 'rollout')),
  phase(0, 't0', 'trainer', 'training'),
  ...['r1', 'r2', 'r3'].map((r) => phase(0, r, 'rollout', rolloutPhase)),
];

const round4 = (x: number) => Math.round(x * 10_000) / 10_000;
const spec = (settings = {}) => ProjectionSpecification.for(createEttrProjection(settings));
const gpuSeconds = (rows: ReturnType<typeof downtimeLedger>, category: string) =>
  Math.round(rows.filter((r) => r.category === category).reduce((a, r) => a + r.gpuHours, 0) * 3600);

describe('ETTR projection', () => {
  it('counts a fault-free job as effective except its start-up', () => {
    spec()
      .given([
        started(),
        registered(0, 't0', 'trainer'),
        ...['r1', 'r2', 'r3'].map((r) => registered(0, r, 'rollout')),
        phase(60, 't0', 'trainer', 'training'),
        ...['r1', 'r2', 'r3'].map((r) => phase(60, r, 'rollout', 'rollout')),
        phase(300, 't0', 'trainer', 'weight-update'),
        phase(310, 't0', 'trainer', 'idle'), // a trainer waiting for rollouts in a healthy pipeline is not downtime
        tick(660),
      ])
      .then((view) => {
        expect(ettrOf(view)).toBeCloseTo(600 / 660, 6);
        const rows = downtimeLedger(view);
        expect(gpuSeconds(rows, 'startup')).toBe(32 * 60);
        expect(rows.every((r) => r.category === 'startup')).toBe(true);
        expect(describeDowntime(ettrReport(view))).toBe('no GPU time lost to faults');
      });
  });

  it('during a trainer restart with rollouts still generating, counts #rollout / (#rollout + #trainer) GPUs as effective', () => {
    spec({ windowMs: 100_000, sampleMs: 100_000 })
      .given([
        ...workingJob(),
        trainerFault(100),
        decided(100, 't0/explicit-signal/1', 't0', 'restart-trainer-group'),
        restartGroup(100, 't0/explicit-signal/1'),
        phase(160, 't0', 'trainer', 'initializing'),
        phase(200, 't0', 'trainer', 'training'),
        tick(300),
      ])
      .then((view) => {
        // [100, 200): 24 of 32 GPUs effective — the paper's recovery ratio.
        expect(slidingEttr(view)).toEqual([
          { atSeconds: 100, ettr: 1 },
          { atSeconds: 200, ettr: 24 / 32 },
          { atSeconds: 300, ettr: 1 },
        ]);
        expect(ettrOf(view)).toBeCloseTo(1 - (8 * 100) / (32 * 300), 6);
        const rows = downtimeLedger(view);
        expect(gpuSeconds(rows, 'restart')).toBe(8 * 60);
        expect(gpuSeconds(rows, 'reinitialization')).toBe(8 * 40);
        expect(
          rows.every((r) => r.action === 'restart-trainer-group' && r.role === 'trainer' && r.detectionRule === 'explicit-signal' && r.machineId === 't0'),
        ).toBe(true);
        expect(downtimeBy(rows, 'action')).toEqual([{ key: 'restart-trainer-group', gpuHours: expect.closeTo((8 * 100) / 3600, 3) }]);
      });
  });

  it('reaches back to the fault for the detection window a verdict reports', () => {
    spec({ windowMs: 60_000, sampleMs: 60_000 })
      .given([
        ...workingJob(),
        trainerFault(100, 30_000),
        decided(100, 't0/explicit-signal/1', 't0', 'restart-trainer-group'),
        restartGroup(100, 't0/explicit-signal/1'),
        phase(120, 't0', 'trainer', 'training'),
        tick(180),
      ])
      .then((view) => {
        const rows = downtimeLedger(view);
        expect(gpuSeconds(rows, 'detection')).toBe(8 * 30);
        expect(gpuSeconds(rows, 'restart')).toBe(8 * 20);
        // The correction lands in the window it concerns: [60, 120) lost 50 s of the trainer's 8 GPUs.
        expect(slidingEttr(view)).toEqual([
          { atSeconds: 60, ettr: 1 },
          { atSeconds: 120, ettr: expect.closeTo(1 - (8 * 50) / (32 * 60), 4) },
          { atSeconds: 180, ettr: 1 },
        ]);
      });
  });

  it('counts rollouts idling while the trainer is down as waiting on a dead role (sync mode)', () => {
    spec()
      .given([
        ...workingJob('sync', 'idle'),
        trainerFault(100),
        decided(100, 't0/explicit-signal/1', 't0', 'restart-trainer-group'),
        restartGroup(100, 't0/explicit-signal/1'),
        phase(200, 't0', 'trainer', 'training'),
        tick(300),
      ])
      .then((view) => {
        const rows = downtimeLedger(view);
        expect(gpuSeconds(rows, 'waiting-on-dead-role')).toBe(24 * 100);
        expect(ettrOf(view)).toBeCloseTo(1 - 100 / 300, 6);
      });
  });

  const rolloutFault = (s: number, machineId: string) =>
    at(s, 'FaultConfirmed', {
      verdictId: `${machineId}/engine-exited/1`,
      machineId,
      role: 'rollout',
      rule: 'explicit-signal',
      evidence: {},
      handledAs: 'rollout',
      machineFaulty: false,
      detectionLatencyMs: 0,
    });

  /** The controller restarts the engine in place; the agent reports the new engine initialising. */
  const restartEngine = (s: number, machineId: string) => [
    at(s, 'RestartRolloutEngine', {
      recoveryId: `${machineId}/engine-exited/1/recovery`,
      commandId: `${machineId}/engine-exited/1/recovery/1`,
      machineId,
      attempt: 1,
      budget: 3,
    }),
    phase(s + 5, machineId, 'rollout', 'initializing'),
  ];

  it('an engine restarted in place is down until the new engine works: restart, then re-initialisation', () => {
    spec()
      .given([
        ...workingJob(),
        rolloutFault(100, 'r1'),
        decided(100, 'r1/engine-exited/1', 'r1', 'restart-rollout-engine', 'rollout-fault'),
        ...restartEngine(100, 'r1'),
        phase(130, 'r1', 'rollout', 'rollout'),
        tick(300),
      ])
      .then((view) => {
        const rows = downtimeLedger(view);
        expect(gpuSeconds(rows, 'restart')).toBe(8 * 5);
        expect(gpuSeconds(rows, 'reinitialization')).toBe(8 * 25);
        expect(ettrOf(view)).toBeCloseTo(1 - (8 * 30) / (32 * 300), 6);
        expect(Object.values(view.outages).map((o) => o.closedAt)).toEqual([T0 + 130_000]);
      });
  });

  it('an idle trainer is the pipeline at work while one rollout machine serves: only the machine that is down is charged', () => {
    spec()
      .given([
        ...workingJob(),
        phase(0, 't0', 'trainer', 'idle'),
        rolloutFault(100, 'r1'),
        decided(100, 'r1/engine-exited/1', 'r1', 'restart-rollout-engine', 'rollout-fault'),
        ...restartEngine(100, 'r1'),
        phase(200, 'r1', 'rollout', 'rollout'),
        tick(300),
      ])
      .then((view) => {
        const rows = downtimeLedger(view);
        expect(gpuSeconds(rows, 'waiting-on-dead-role')).toBe(0);
        expect(rows.every((r) => r.machineId === 'r1')).toBe(true);
        expect(ettrOf(view)).toBeCloseTo(1 - (8 * 100) / (32 * 300), 6);
      });
  });

  it('an idle trainer waits on a dead role once no rollout machine serves, from the moment the last one went', () => {
    spec()
      .given([
        ...workingJob(),
        phase(0, 't0', 'trainer', 'idle'),
        ...['r1', 'r2', 'r3'].flatMap((r, i) => [
          rolloutFault(100 + 10 * i, r),
          decided(100 + 10 * i, `${r}/engine-exited/1`, r, 'restart-rollout-engine', 'rollout-fault'),
          ...restartEngine(100 + 10 * i, r),
        ]),
        phase(200, 'r2', 'rollout', 'rollout'),
        ...['r1', 'r3'].map((r) => phase(250, r, 'rollout', 'rollout')),
        tick(300),
      ])
      .then((view) => {
        const rows = downtimeLedger(view).filter((r) => r.category === 'waiting-on-dead-role');
        // [120, 200): r3 was the last to go and r2 the first back; charged to the first open outage.
        expect(rows).toEqual([expect.objectContaining({ machineId: 't0', outageId: 'r1/engine-exited/1', gpuHours: expect.closeTo((8 * 80) / 3600, 3) })]);
      });
  });

  it('an idle trainer counts as startup while the rollout machines have not come up yet', () => {
    spec()
      .given([
        started(),
        registered(0, 't0', 'trainer'),
        ...['r1', 'r2'].map((r) => registered(0, r, 'rollout')),
        phase(10, 't0', 'trainer', 'idle'),
        phase(40, 'r1', 'rollout', 'initializing'),
        phase(60, 'r1', 'rollout', 'rollout'),
        phase(90, 'r2', 'rollout', 'rollout'),
        tick(100),
      ])
      .then((view) => {
        const startup = downtimeLedger(view).filter((r) => r.category === 'startup');
        const byMachine = Object.fromEntries(startup.map((r) => [r.machineId, Math.round(r.gpuHours * 3600)]));
        expect(byMachine).toEqual({ t0: 8 * 60, r1: 8 * 60, r2: 8 * 90 });
      });
  });

  it('a task restart loses the rollout work of the batch in progress, not what an earlier step consumed', () => {
    const verdict = 't0/explicit-signal/1';
    spec()
      .given([
        ...workingJob(),
        at(100, 'TrainingStepStarted', { step: 0, batchId: 'b0', startedAt: iso(100) }),
        at(120, 'TrainingStepCompleted', { step: 0, batchId: 'b0', durationMs: 20_000 }),
        trainerFault(150),
        decided(150, verdict, 't0', 'restart-task', 'escalate-repeated-fault-in-step'),
        at(150, 'RestartTask', { recoveryId: `${verdict}/recovery`, commandId: `${verdict}/recovery/1`, rule: 'escalate-repeated-fault-in-step' }),
        ...['t0', 'r1', 'r2', 'r3'].map((m) => phase(200, m, m === 't0' ? 'trainer' : 'rollout', 'initializing')),
        phase(250, 't0', 'trainer', 'training'),
        ...['r1', 'r2', 'r3'].map((r) => phase(250, r, 'rollout', 'rollout')),
        tick(300),
      ])
      .then((view) => {
        const rows = downtimeLedger(view);
        // Generated since step 0 started (t=100) and not consumed: 3 rollouts × 8 GPUs × 50 s.
        expect(gpuSeconds(rows, 'lost-rollout')).toBe(24 * 50);
        expect(gpuSeconds(rows, 'restart')).toBe(32 * 50);
        expect(gpuSeconds(rows, 'reinitialization')).toBe(32 * 50);
        expect(ettrOf(view)).toBeCloseTo((32 * 300 - 24 * 50 - 32 * 100) / (32 * 300), 6);
        expect(rows.every((r) => r.action === 'restart-task')).toBe(true);
      });
  });

  it("a task restart that subsumes a rollout's replacement ends once the replacement works, not never", () => {
    // As a campaign on the real job had it: a rollout lost and its replacement asked for, then, in the same
    // instant, another fault escalated to a task restart; the lost machine deregistered, its replacement
    // registered, and every machine came back. Before, the restart waited for the lost machine for ever,
    // and every idle machine counted as waiting on it to the end of the job.
    const lost = 'r2/rollout-silent/1';
    const escalated = 't0/explicit-signal/1';
    spec()
      .given([
        ...workingJob(),
        rolloutLost(100, lost, 'r2', 'rollout-silent'),
        decided(100, lost, 'r2', 'replace-rollout', 'rollout-fault'),
        at(100, 'ReplaceMachine', {
          recoveryId: `${lost}/recovery`,
          commandId: `${lost}/recovery/1`,
          machineId: 'r2',
          role: 'rollout',
          zone: 'z',
          hardwareClass: 'h20',
        }),
        trainerFault(100, 0, escalated),
        decided(100, escalated, 't0', 'restart-task', 'escalate-restart-failed-twice'),
        at(100, 'RestartTask', { recoveryId: `${escalated}/recovery`, commandId: `${escalated}/recovery/1`, rule: 'escalate-restart-failed-twice' }),
        at(101, 'MachineDeregistered', { machineId: 'r2', reason: 'replaced' }),
        registered(120, 'r4', 'rollout'),
        ...['t0', 'r1', 'r3', 'r4'].map((m) => phase(130, m, m === 't0' ? 'trainer' : 'rollout', 'initializing')),
        phase(150, 't0', 'trainer', 'training'),
        ...['r1', 'r3', 'r4'].map((r) => phase(150, r, 'rollout', 'rollout')),
        // Later the trainer idles between batches: with every machine back, that is the pipeline at work.
        phase(200, 't0', 'trainer', 'idle'),
        tick(400),
      ])
      .then((view) => {
        const rows = downtimeLedger(view);
        expect(Object.values(view.outages).every((o) => o.closedAt !== null)).toBe(true);
        expect(gpuSeconds(rows, 'waiting-on-dead-role')).toBe(0);
        // Four slots down from the restart to t=150, none after; r2's slot until its replacement r4 worked.
        expect(gpuSeconds(rows, 'restart') + gpuSeconds(rows, 'reinitialization')).toBe(32 * 50);
        const slot = rows.filter((r) => r.machineId === 'r2' || r.machineId === 'r4').filter((r) => r.category !== 'lost-rollout');
        expect(Math.round(slot.reduce((a, r) => a + r.gpuHours, 0) * 3600)).toBe(8 * 50);
        // Besides, the batch in progress was lost (every rollout's work since t=0).
        expect(gpuSeconds(rows, 'lost-rollout')).toBe(24 * 100);
        expect(ettrOf(view)).toBeCloseTo((32 * 400 - 32 * 50 - 24 * 100) / (32 * 400), 3);
      });
  });

  it("a replaced rollout machine's slot is down from the fault until its replacement generates", () => {
    const verdict = 'r2/rollout-silent/1';
    spec()
      .given([
        ...workingJob(),
        rolloutLost(100, verdict, 'r2', 'rollout-silent', 70_000),
        decided(100, verdict, 'r2', 'replace-rollout', 'rollout-fault'),
        at(100, 'ReplaceMachine', {
          recoveryId: `${verdict}/recovery`,
          commandId: `${verdict}/recovery/1`,
          machineId: 'r2',
          role: 'rollout',
          zone: 'z',
          hardwareClass: 'h20',
        }),
        at(110, 'MachineDeregistered', { machineId: 'r2', reason: 'replaced' }),
        registered(200, 'r9', 'rollout'),
        phase(250, 'r9', 'rollout', 'rollout'),
        tick(300),
      ])
      .then((view) => {
        const rows = downtimeLedger(view);
        expect(gpuSeconds(rows, 'detection')).toBe(8 * 70);
        expect(gpuSeconds(rows, 'restart')).toBe(8 * 100);
        expect(gpuSeconds(rows, 'reinitialization')).toBe(8 * 50);
        expect(ettrOf(view)).toBeCloseTo(1 - (8 * 220) / (32 * 300), 6);
        expect(new Set(rows.map((r) => r.machineId))).toEqual(new Set(['r2', 'r9']));
        expect(describeDowntime(ettrReport(view))).toBe(`lost ${((8 * 220) / 3600).toFixed(1)} GPU-hours to replace-rollout`);
      });
  });

  it('a replacement lost before it ever worked leaves its slot to the next one: no machine is charged after that one works', () => {
    const replace = (s: number, verdict: string, machineId: string) => [
      rolloutLost(s, verdict, machineId, 'agent-silent'),
      decided(s, verdict, machineId, 'replace-rollout', 'rollout-fault'),
      at(s, 'ReplaceMachine', {
        recoveryId: `${verdict}/recovery`,
        commandId: `${verdict}/recovery/1`,
        machineId,
        role: 'rollout',
        zone: 'z',
        hardwareClass: 'h20',
      }),
      at(s + 1, 'MachineDeregistered', { machineId, reason: 'replaced' }),
    ];
    spec()
      .given([
        ...workingJob(),
        ...replace(100, 'r2/agent-silent/1', 'r2'),
        registered(120, 'r9', 'rollout'),
        // r9 dies while its engine still starts: its own verdict finds it down already.
        ...replace(150, 'r9/agent-silent/2', 'r9'),
        registered(170, 'r10', 'rollout'),
        phase(200, 'r10', 'rollout', 'rollout'),
        tick(300),
      ])
      .then((view) => {
        expect(Object.values(view.outages).map((o) => [o.outageId, o.closedAt])).toEqual([
          ['r2/agent-silent/1', T0 + 170_000],
          ['r9/agent-silent/2', T0 + 200_000],
        ]);
        expect(Object.keys(view.machines).sort()).toEqual(['r1', 'r10', 'r3', 't0']);
        // r2's slot is down from 100 until r10 works at 200; nothing is charged after.
        expect(ettrOf(view)).toBeCloseTo(1 - (8 * 100) / (32 * 300), 6);
      });
  });

  it('a replacement asked for twice (the first request failed) is one slot: the next machine to register is not taken for it', () => {
    const verdict = 'r2/rollout-silent/1';
    const replaceAgain = (s: number, seq: number) =>
      at(s, 'ReplaceMachine', {
        recoveryId: `${verdict}/recovery`,
        commandId: `${verdict}/recovery/${seq}`,
        machineId: 'r2',
        role: 'rollout',
        zone: 'z',
        hardwareClass: 'h20',
      });
    spec()
      .given([
        ...workingJob(),
        rolloutLost(100, verdict, 'r2', 'rollout-silent'),
        decided(100, verdict, 'r2', 'replace-rollout', 'rollout-fault'),
        replaceAgain(100, 1),
        replaceAgain(106, 2),
        at(107, 'MachineDeregistered', { machineId: 'r2', reason: 'replaced' }),
        registered(130, 'r9', 'rollout'),
        phase(150, 'r9', 'rollout', 'rollout'),
        // Later a machine for another reason (a pool grown, a refill): it counts on its own.
        registered(200, 'r10', 'rollout'),
        phase(200, 'r10', 'rollout', 'rollout'),
        tick(300),
      ])
      .then((view) => {
        expect(Object.values(view.outages).map((o) => [o.outageId, o.closedAt, o.awaitingReplacement])).toEqual([[verdict, T0 + 150_000, []]]);
        expect(view.machines.r10.heldBy).toBeNull();
        // r2's slot down from 100 to 150; r10 effective from 200 (4 machines until 200, 5 after).
        expect(ettrOf(view)).toBeCloseTo(1 - (8 * 50) / (32 * 300 + 8 * 100), 6);
      });
  });

  it('an outage a notice announced (node-draining) is planned downtime; one found by silence is not', () => {
    const drained = at(100, 'FaultConfirmed', {
      verdictId: 'r1/explicit-signal/1',
      machineId: 'r1',
      role: 'rollout',
      rule: 'explicit-signal',
      evidence: { signal: 'node-draining', detail: 'EC2 spot instance action terminate: this machine goes by … (in 120 s)' },
      handledAs: 'rollout',
      machineFaulty: true,
      detectionLatencyMs: 0,
    });
    spec()
      .given([...workingJob(), drained, rolloutLost(100, 'r2/rollout-silent/1', 'r2', 'rollout-silent', 30_000), tick(160)])
      .then((view) => {
        const rows = downtimeLedger(view);
        const machines = (planned: boolean) => [...new Set(rows.filter((r) => r.outageId !== null && r.planned === planned).map((r) => r.machineId))];
        expect(machines(true)).toEqual(['r1']);
        expect(machines(false)).toEqual(['r2']);
        // r1 down 60 s from its notice, r2 90 s from the silence its verdict reaches back to; 8 GPUs each.
        expect(ettrReport(view).downtimeByNotice).toEqual({ plannedGpuHours: round4((8 * 60) / 3600), unplannedGpuHours: round4((8 * 90) / 3600) });
      });
  });

  it('a departing trainer counts as working while its group waits for the step’s checkpoint; down from the move on', () => {
    const verdictId = 't0/explicit-signal/1';
    const notice = at(100, 'FaultConfirmed', {
      verdictId,
      machineId: 't0',
      role: 'trainer',
      rule: 'explicit-signal',
      evidence: { signal: 'node-draining', departsAt: iso(130) },
      handledAs: 'trainer',
      machineFaulty: true,
      detectionLatencyMs: 0,
    });
    const handover = (s: number, status: 'waiting' | 'saved') =>
      at(s, 'RecoveryDecided', {
        recoveryId: `${verdictId}/recovery`,
        verdictId,
        machineId: 't0',
        action: 'request-new-trainer-machine',
        rule: 'planned-trainer-departure',
        step: 3,
        evidence: { signal: 'node-draining' },
        handover: { checkpointStep: 3, by: iso(127), status },
      });
    spec()
      .given([
        ...workingJob(),
        notice,
        handover(100, 'waiting'),
        phase(110, 't0', 'trainer', 'checkpoint', 3),
        handover(120, 'saved'),
        restartGroup(120, verdictId),
        phase(160, 't0', 'trainer', 'training', 4),
        tick(300),
      ])
      .then((view) => {
        // Down from the move (120) until it trained again (160), not from the notice (100): 8 GPUs for 40 s, planned.
        expect(ettrReport(view).downtimeByNotice).toEqual({ plannedGpuHours: round4((8 * 40) / 3600), unplannedGpuHours: 0 });
        expect(ettrOf(view)).toBeCloseTo(1 - (8 * 40) / (32 * 300), 6);
      });
    // Without a handover (moved at once), the decision holds it at once.
    spec()
      .given([
        ...workingJob(),
        notice,
        decided(100, verdictId, 't0', 'request-new-trainer-machine', 'planned-trainer-departure'),
        restartGroup(100, verdictId),
        phase(160, 't0', 'trainer', 'training', 4),
        tick(300),
      ])
      .then((view) => expect(ettrReport(view).downtimeByNotice).toEqual({ plannedGpuHours: round4((8 * 60) / 3600), unplannedGpuHours: 0 }));
  });

  it('a verdict covered by an active recovery adds no downtime of its own', () => {
    spec()
      .given([
        ...workingJob(),
        trainerFault(100),
        decided(100, 't0/explicit-signal/1', 't0', 'restart-trainer-group'),
        restartGroup(100, 't0/explicit-signal/1'),
        trainerFault(130, 5_000, 't0/trainer-idle/2'),
        decided(130, 't0/trainer-idle/2', 't0', 'report-only', 'covered-by-active-recovery'),
        phase(200, 't0', 'trainer', 'training'),
        tick(300),
      ])
      .then((view) => {
        const rows = downtimeLedger(view);
        expect(rows.every((r) => r.outageId === 't0/explicit-signal/1')).toBe(true);
        expect(ettrOf(view)).toBeCloseTo(1 - (8 * 100) / (32 * 300), 6);
      });
  });

  it('collects recovery latency per stage by action', () => {
    spec()
      .given([
        ...workingJob(),
        trainerFault(100),
        decided(100, 't0/explicit-signal/1', 't0', 'restart-trainer-group'),
        at(200, 'RecoveryCompleted', {
          recoveryId: 't0/explicit-signal/1/recovery',
          outcome: 'recovered',
          stagesMs: { detect: 1000, decide: 3, restart: 60_000, reconnect: 39_000 },
        }),
      ])
      .then((view) => {
        expect(ettrReport(view).stages).toEqual([
          {
            action: 'restart-trainer-group',
            count: 1,
            detect: { mean: 1000, max: 1000 },
            decide: { mean: 3, max: 3 },
            restart: { mean: 60_000, max: 60_000 },
            reconnect: { mean: 39_000, max: 39_000 },
          },
        ]);
      });
  });

  it('rejects a window that is not a whole number of sample periods', () => {
    expect(() => createEttrProjection({ windowMs: 90_000, sampleMs: 60_000 })).toThrow(/multiple of the sample period/);
  });
});

describe('ETTR: the job holds its machines from its start', () => {
  it('charges a machine of the job that registers late as starting up since the job began; a replacement counts from its registration', () => {
    const p = createEttrProjection();
    let v = p.initialView();
    for (const e of [
      at(0, 'JobStarted', { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 1 }),
      registered(10, 't0', 'trainer', 1),
      phase(10, 't0', 'trainer', 'training'),
      registered(30, 'r1', 'rollout', 1),
      phase(30, 'r1', 'rollout', 'rollout'),
      // Not one of the two the job started with: counted from here.
      registered(50, 'r2', 'rollout', 1),
      phase(50, 'r2', 'rollout', 'rollout'),
      tick(60),
    ])
      v = p.evolve(v, e);
    // t0 from 0 (10 s starting), r1 from 0 (30 s starting), r2 from 50: 60 + 60 + 10 GPU-s.
    expect(Math.round(v.totalGpuMs / 1000)).toBe(130);
    expect(Math.round(v.effectiveGpuMs / 1000)).toBe(50 + 30 + 10);
    expect(gpuSeconds(downtimeLedger(v), 'startup')).toBe(40);
    expect(ettrOf(v)).toBeCloseTo(90 / 130);
  });
});
