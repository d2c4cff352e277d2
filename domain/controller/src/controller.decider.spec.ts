import { DeciderSpecification } from '@robustrl/domain-kit';
import { draft, Draft } from '@robustrl/contracts';
import { iso } from '@robustrl/testing/job-timeline';
import {
  decidedOf,
  engineCrashed,
  failed,
  fault,
  heard,
  jobAtStep3,
  msg,
  observe,
  phase,
  play,
  register,
  rolloutMachineLost,
  succeeded,
  types,
} from './spec-support/controller-story';
import { ControllerDecider, ControllerEvent, createControllerDecider } from './controller.decider';

const spec = DeciderSpecification.for(ControllerDecider);
const eq = (actual: Draft[], expected: readonly Draft[]) => expect(actual).toEqual(expected);

describe('trainer fault → restart only the trainer group', () => {
  it('restarts every trainer machine, reloading the last checkpoint and keeping the batch', () => {
    spec
      .given(jobAtStep3())
      .when(observe(fault(400, 'trainer-1')))
      .then(
        [
          draft('RecoveryDecided', {
            recoveryId: 'trainer-1/v400/recovery',
            verdictId: 'trainer-1/v400',
            machineId: 'trainer-1',
            action: 'restart-trainer-group',
            rule: 'trainer-fault',
            step: 3,
            evidence: { signal: 'process-exited' },
          }),
          draft('RestartTrainerGroup', {
            recoveryId: 'trainer-1/v400/recovery',
            commandId: 'trainer-1/v400/recovery/1',
            machines: ['trainer-0', 'trainer-1'],
            step: 3,
            checkpointStep: 2,
            keepBatch: true,
            // The group is told where each member's agent is (rank 0 = first is where it meets)
            // and which batch the retried step keeps.
            agentAddresses: { 'trainer-0': 'trainer-0:7070', 'trainer-1': 'trainer-1:7070' },
            batchId: 'b3',
            // The job's first group was epoch 0: this one fences it (docs/contributors/recovery.md "Fencing").
            trainerEpoch: 1,
          }),
        ],
        eq,
      );
  });

  it('decides nothing on a redelivered verdict: no duplicate restart', () => {
    const { emitted } = play(jobAtStep3(), [fault(400, 'trainer-1'), fault(400, 'trainer-1')]);
    expect(types(emitted)).toEqual(['RecoveryDecided', 'RestartTrainerGroup']);
  });

  it('completes once every restarted machine reports in, with the latency of each stage', () => {
    const f = fault(400, 'trainer-1', { detectionLatencyMs: 5000 });
    const { emitted } = play(jobAtStep3(), [
      f,
      succeeded(430, 'trainer-1/v400/recovery/1', 'trainer-0'),
      phase(431, 'trainer-0'),
      succeeded(440, 'trainer-1/v400/recovery/1', 'trainer-1'),
      phase(452, 'trainer-1'),
    ]);
    expect(emitted.at(-1)).toEqual(
      draft('RecoveryCompleted', {
        recoveryId: 'trainer-1/v400/recovery',
        outcome: 'recovered',
        stagesMs: { detect: 5000, decide: 0, restart: 40_000, reconnect: 12_000 },
      }),
    );
  });

  it('a machine whose clock is minutes behind reports in after its restart: timed by when the controller heard it', () => {
    const f = fault(400, 'trainer-1', { detectionLatencyMs: 5000 });
    // trainer-1's clock is 240 s behind: its answer and its phase are written "before" the restart.
    const { emitted } = play(jobAtStep3(), [
      f,
      succeeded(430, 'trainer-1/v400/recovery/1', 'trainer-0'),
      phase(431, 'trainer-0'),
      heard(440, succeeded(200, 'trainer-1/v400/recovery/1', 'trainer-1')),
      heard(452, phase(212, 'trainer-1')),
    ]);
    expect(emitted.at(-1)).toEqual(
      draft('RecoveryCompleted', {
        recoveryId: 'trainer-1/v400/recovery',
        outcome: 'recovered',
        stagesMs: { detect: 5000, decide: 0, restart: 40_000, reconnect: 12_000 },
      }),
    );
  });

  it('a rank hanging on its dead peer during the restart is covered by it, not a second fault', () => {
    const { emitted } = play(jobAtStep3(), [fault(400, 'trainer-1'), fault(401, 'trainer-0', { rule: 'trainer-idle' })]);
    expect(decidedOf(emitted)).toEqual([
      ['restart-trainer-group', 'trainer-fault'],
      ['report-only', 'covered-by-active-recovery'],
    ]);
    expect(types(emitted)).not.toContain('RestartTask');
  });
});

describe('escalation to a whole-task restart: exactly the three rules of paper §5.1.2', () => {
  it('rule 1: a fault in the first iteration restarts the task', () => {
    const fresh = [
      msg(0, 'JobStarted', { mode: 'async', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 1 }),
      register('trainer-0', 'trainer'),
      register('rollout-0', 'rollout'),
    ];
    spec
      .given(fresh)
      .when(observe(fault(10, 'trainer-0')))
      .then(
        [
          draft('RecoveryDecided', {
            recoveryId: 'trainer-0/v10/recovery',
            verdictId: 'trainer-0/v10',
            machineId: 'trainer-0',
            action: 'restart-task',
            rule: 'escalate-first-iteration',
            step: 0,
            evidence: { signal: 'process-exited' },
          }),
          draft('RestartTask', {
            recoveryId: 'trainer-0/v10/recovery',
            commandId: 'trainer-0/v10/recovery/1',
            rule: 'escalate-first-iteration',
            trainerEpoch: 1,
          }),
        ],
        eq,
      );
  });

  it('rule 1 covers rollout faults too (code errors in rollout), and the first iteration after a resume', () => {
    const resumed = [...jobAtStep3(), msg(500, 'JobStarted', { mode: 'semi-sync', resumedFromStep: 2, trainerMachines: 2, rolloutMachines: 3 })];
    const { emitted } = play(resumed, [fault(510, 'rollout-0', { role: 'rollout', handledAs: 'rollout' })]);
    expect(decidedOf(emitted)).toEqual([['restart-task', 'escalate-first-iteration']]);
  });

  it('rule 1 is not reopened by a JobStarted read after the steps it precedes (another topic, replayed)', () => {
    const [started, ...rest] = jobAtStep3();
    const { emitted } = play([...rest, started], [fault(400, 'trainer-1')]);
    expect(decidedOf(emitted)).toEqual([['restart-trainer-group', 'trainer-fault']]);
    // The same history in order, then a resume later than every step: that one starts a first iteration.
    const resumed = play(
      [started, ...rest, msg(350, 'JobStarted', { mode: 'semi-sync', resumedFromStep: 2, trainerMachines: 2, rolloutMachines: 3 })],
      [fault(400, 'trainer-1')],
    );
    expect(decidedOf(resumed.emitted)).toEqual([['restart-task', 'escalate-first-iteration']]);
  });

  it('rule 2: a second trainer fault in the same step restarts the task', () => {
    const { emitted } = play(jobAtStep3(), [
      fault(400, 'trainer-1'),
      succeeded(430, 'trainer-1/v400/recovery/1', null),
      phase(431, 'trainer-0'),
      phase(432, 'trainer-1'),
      fault(500, 'trainer-0'),
    ]);
    expect(decidedOf(emitted)).toEqual([
      ['restart-trainer-group', 'trainer-fault'],
      ['restart-task', 'escalate-repeated-fault-in-step'],
    ]);
    expect(emitted.at(-1)).toMatchObject({ type: 'RestartTask', data: { rule: 'escalate-repeated-fault-in-step' } });
  });

  it('a trainer fault in a later step is a new first fault', () => {
    const { emitted } = play(jobAtStep3(), [
      fault(400, 'trainer-1'),
      succeeded(430, 'trainer-1/v400/recovery/1', null),
      phase(431, 'trainer-0'),
      phase(432, 'trainer-1'),
      msg(600, 'TrainingStepCompleted', { step: 3, batchId: 'b3', durationMs: 1 }),
      msg(601, 'TrainingStepStarted', { step: 4, batchId: 'b4', startedAt: iso(601) }),
      fault(700, 'trainer-0'),
    ]);
    expect(decidedOf(emitted)).toEqual([
      ['restart-trainer-group', 'trainer-fault'],
      ['restart-trainer-group', 'trainer-fault'],
    ]);
  });

  it('rule 3: one failed restart is allowed, the second escalates', () => {
    const { emitted } = play(jobAtStep3(), [
      fault(400, 'trainer-1'),
      failed(430, 'trainer-1/v400/recovery/1', null), // failed without naming a machine: retried as is
      failed(460, 'trainer-1/v400/recovery/2', null),
    ]);
    expect(decidedOf(emitted)).toEqual([
      ['restart-trainer-group', 'trainer-fault'],
      ['restart-trainer-group', 'trainer-fault'],
      ['restart-task', 'escalate-restart-failed-twice'],
    ]);
    expect(types(emitted)).toEqual(['RecoveryDecided', 'RestartTrainerGroup', 'RecoveryDecided', 'RestartTrainerGroup', 'RecoveryDecided', 'RestartTask']);
  });

  it('a failed refill of the rollout pool does not count as a failed restart', () => {
    const { emitted } = play(jobAtStep3(), [
      fault(400, 'trainer-1', { machineFaulty: true }),
      failed(405, 'trainer-1/v400/recovery/2', null), // the refill (ReplaceMachine for the rollout pool)
      succeeded(410, 'trainer-1/v400/recovery/1', 'rollout-0'),
      failed(430, 'trainer-1/v400/recovery/3', null), // the first failed trainer restart: allowed
    ]);
    expect(decidedOf(emitted)).toEqual([
      ['warm-standby-from-rollout', 'trainer-machine-faulty'],
      ['warm-standby-from-rollout', 'trainer-machine-faulty'],
    ]);
    expect(types(emitted)).not.toContain('RestartTask');
  });

  it('rollout faults never restart the task: a replacement failing twice is abandoned', () => {
    const { emitted } = play(jobAtStep3(), [
      rolloutMachineLost(400, 'rollout-0'),
      failed(430, 'rollout-0/v400/recovery/1', null),
      failed(460, 'rollout-0/v400/recovery/2', null),
    ]);
    expect(types(emitted)).toEqual(['RecoveryDecided', 'ReplaceMachine', 'RecoveryDecided', 'ReplaceMachine', 'RecoveryCompleted']);
    expect(emitted.at(-1)).toMatchObject({ data: { outcome: 'abandoned' } });
  });
});

describe('faulty trainer machine → a rollout as warm standby (semi-sync/async), a new machine (sync)', () => {
  it('promotes the least busy rollout of the same zone and class, and refills the rollout pool', () => {
    const busy = msg(350, 'RolloutThroughputSampled', {
      machineId: 'rollout-0',
      rolloutId: 'r0',
      sampledAt: iso(350),
      windowSeconds: 10,
      tokensPerSecond: 900,
      completedRequests: 3,
      inFlightRequests: 12,
      awaitingTools: 0,
    });
    const idle = msg(350, 'RolloutThroughputSampled', {
      machineId: 'rollout-1',
      rolloutId: 'r1',
      sampledAt: iso(350),
      windowSeconds: 10,
      tokensPerSecond: 900,
      completedRequests: 3,
      inFlightRequests: 2,
      awaitingTools: 0,
    });
    // rollout-2 is idler still, but in another zone: not a valid standby (paper §5.1.3 prerequisite).
    spec
      .given([...jobAtStep3(), busy, idle])
      .when(observe(fault(400, 'trainer-1', { signal: undefined, machineFaulty: true, evidence: { signal: 'xid-error' } } as never)))
      .then(
        [
          draft('RecoveryDecided', {
            recoveryId: 'trainer-1/v400/recovery',
            verdictId: 'trainer-1/v400',
            machineId: 'trainer-1',
            action: 'warm-standby-from-rollout',
            rule: 'trainer-machine-faulty',
            step: 3,
            evidence: { signal: 'xid-error' },
          }),
          draft('PromoteRolloutToTrainer', {
            recoveryId: 'trainer-1/v400/recovery',
            commandId: 'trainer-1/v400/recovery/1',
            rolloutMachineId: 'rollout-1',
            replacesMachineId: 'trainer-1',
          }),
          draft('ReplaceMachine', {
            recoveryId: 'trainer-1/v400/recovery',
            commandId: 'trainer-1/v400/recovery/2',
            machineId: 'trainer-1',
            role: 'rollout',
            zone: 'az-1',
            hardwareClass: 'h100x8',
          }),
        ],
        eq,
      );
  });

  it('a fault between steps keeps no batch: the next step had not begun on one', () => {
    const between = [...jobAtStep3(), msg(390, 'TrainingStepCompleted', { step: 3, batchId: 'b3', durationMs: 1 })];
    const restart = play(between, [fault(400, 'trainer-1')]).emitted.find((d) => d.type === 'RestartTrainerGroup')!;
    expect(restart.data).toMatchObject({ step: 4, keepBatch: true });
    expect(restart.data).not.toHaveProperty('batchId');
  });

  it('after the promotion the trainer group restarts with the standby in and the faulty machine out', () => {
    const { emitted } = play(jobAtStep3(), [fault(400, 'trainer-1', { machineFaulty: true }), succeeded(410, 'trainer-1/v400/recovery/1', 'rollout-0')]);
    expect(emitted.at(-1)).toEqual(
      draft('RestartTrainerGroup', {
        recoveryId: 'trainer-1/v400/recovery',
        commandId: 'trainer-1/v400/recovery/3',
        machines: ['trainer-0', 'rollout-0'],
        step: 3,
        checkpointStep: 2,
        keepBatch: true,
        agentAddresses: { 'trainer-0': 'trainer-0:7070', 'rollout-0': 'rollout-0:7070' },
        batchId: 'b3',
        trainerEpoch: 1,
      }),
    );
  });

  it('each group formed after another (a restarted task\'s too) carries a higher trainer epoch, so the older one is fenced (docs/contributors/recovery.md "Fencing")', () => {
    const { emitted } = play(jobAtStep3(), [
      fault(400, 'trainer-1', { machineFaulty: true }),
      succeeded(410, 'trainer-1/v400/recovery/1', 'rollout-0'),
      succeeded(420, 'trainer-1/v400/recovery/3', 'trainer-0'),
      succeeded(421, 'trainer-1/v400/recovery/3', 'rollout-0'),
      phase(430, 'trainer-0'),
      phase(430, 'rollout-0'),
      fault(500, 'trainer-0'),
    ]);
    // The group with the standby in, then (a second fault in the step, rule 2) the restarted task's group.
    const epochs = emitted.flatMap((d) => (d.type === 'RestartTrainerGroup' || d.type === 'RestartTask' ? [[d.type, d.data.trainerEpoch]] : []));
    expect(epochs).toEqual([
      ['RestartTrainerGroup', 1],
      ['RestartTask', 2],
    ]);
  });

  it("the standby's rollout going quiet as it is lent is not a rollout fault: recorded, never replaced, during the recovery and after", () => {
    const lent = msg(406, 'MachineRoleChanged', { machineId: 'rollout-0', from: 'rollout', to: 'trainer', reason: 'warm standby for trainer-1' });
    const during = play(jobAtStep3(), [
      fault(400, 'trainer-1', { machineFaulty: true }),
      lent,
      succeeded(407, 'trainer-1/v400/recovery/1', 'rollout-0'),
      // Its engine stopped for the promotion: the rollout rules see a silent rollout, its probe unanswered.
      rolloutMachineLost(408, 'rollout-0'),
      rolloutMachineLost(409, 'rollout-0'),
    ]);
    expect(decidedOf(during.emitted)).toEqual([
      ['warm-standby-from-rollout', 'trainer-machine-faulty'],
      ['report-only', 'covered-by-active-recovery'],
      ['report-only', 'covered-by-active-recovery'],
    ]);
    expect(during.emitted.filter((d) => d.type === 'ReplaceMachine').map((d) => (d as Draft<'ReplaceMachine'>).data.machineId)).toEqual(['trainer-1']);
    expect(during.emitted.at(-1)).toMatchObject({ type: 'RecoveryDecided' });
    // The recovery done (the group restarted, both ranks reported in), a late rollout verdict about it.
    const after = play(jobAtStep3(), [
      fault(400, 'trainer-1', { machineFaulty: true }),
      lent,
      succeeded(407, 'trainer-1/v400/recovery/1', 'rollout-0'),
      succeeded(409, 'trainer-1/v400/recovery/2', null, 'rollout-9'),
      succeeded(410, 'trainer-1/v400/recovery/3', 'trainer-0'),
      succeeded(410, 'trainer-1/v400/recovery/3', 'rollout-0'),
      phase(411, 'trainer-0'),
      phase(412, 'rollout-0'),
      rolloutMachineLost(420, 'rollout-0'),
    ]);
    expect(types(after.emitted)).toContain('RecoveryCompleted');
    expect(decidedOf(after.emitted).at(-1)).toEqual(['report-only', 'verdict-for-former-role']);
    expect(after.emitted.at(-1)).toMatchObject({ type: 'RecoveryDecided', data: { evidence: { detail: 'rollout-0 is a trainer now; probe unanswered' } } });
  });

  it('a restart that fails on one machine makes that machine faulty: warm standby, not a second blind restart', () => {
    const { emitted } = play(jobAtStep3(), [fault(400, 'trainer-1'), failed(430, 'trainer-1/v400/recovery/1', 'trainer-1')]);
    expect(decidedOf(emitted)).toEqual([
      ['restart-trainer-group', 'trainer-fault'],
      ['warm-standby-from-rollout', 'trainer-machine-faulty'],
    ]);
    expect(emitted.find((d) => d.type === 'PromoteRolloutToTrainer')).toMatchObject({
      data: { rolloutMachineId: 'rollout-0', replacesMachineId: 'trainer-1' },
    });
  });

  it('a machine lost while the group restarts in place fails that restart at once: warm standby now, not at the timeout', () => {
    // trainer-1's machine dies: its peer's rank exits first, and the group restarts in place on both machines.
    const { emitted } = play(jobAtStep3(), [
      fault(400, 'trainer-0'),
      succeeded(401, 'trainer-0/v400/recovery/1', 'trainer-0'),
      fault(404, 'trainer-1', { rule: 'agent-silent', machineFaulty: true, evidence: { detail: 'no report from the agent' } }),
    ]);
    expect(decidedOf(emitted)).toEqual([
      ['restart-trainer-group', 'trainer-fault'],
      ['report-only', 'covered-by-active-recovery'],
      ['warm-standby-from-rollout', 'trainer-machine-faulty'],
    ]);
    expect(emitted.find((d) => d.type === 'RecoveryCommandFailed')).toMatchObject({
      data: {
        commandId: 'trainer-0/v400/recovery/1',
        machineId: 'trainer-1',
        durationMs: 4000,
        error: 'trainer-1 confirmed faulty (agent-silent) while the restart waited on it',
      },
    });
    expect(emitted.find((d) => d.type === 'PromoteRolloutToTrainer')).toMatchObject({
      data: { recoveryId: 'trainer-0/v400/recovery', replacesMachineId: 'trainer-1' },
    });
    // Not faulty (a rank hanging on its peer): covered, and the restart goes on waiting.
    const hanging = play(jobAtStep3(), [fault(400, 'trainer-0'), fault(404, 'trainer-1', { rule: 'trainer-idle' })]);
    expect(types(hanging.emitted)).not.toContain('RecoveryCommandFailed');
  });

  it('sync mode has no standby to borrow: a new machine is requested, then the group restarts with it', () => {
    const { emitted } = play(jobAtStep3('sync'), [
      fault(400, 'trainer-1', { role: 'hybrid', machineFaulty: true }),
      succeeded(500, 'trainer-1/v400/recovery/1', null, 'node-9'),
    ]);
    expect(decidedOf(emitted)).toEqual([['request-new-trainer-machine', 'trainer-machine-faulty']]);
    expect(emitted[1]).toEqual(
      draft('ReplaceMachine', {
        recoveryId: 'trainer-1/v400/recovery',
        commandId: 'trainer-1/v400/recovery/1',
        machineId: 'trainer-1',
        role: 'hybrid',
        zone: 'az-1',
        hardwareClass: 'h100x8',
      }),
    );
    expect(emitted[2]).toMatchObject({ type: 'RestartTrainerGroup', data: { machines: ['trainer-0', 'node-9'] } });
  });

  it('no rollout in the same zone and class: a new machine even in semi-sync', () => {
    const other = [
      msg(0, 'JobStarted', { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 1 }),
      register('trainer-0', 'trainer'),
      register('rollout-0', 'rollout', 0, 'az-1', 'a100x8'),
      msg(50, 'TrainingStepCompleted', { step: 0, batchId: 'b0', durationMs: 1 }),
    ];
    const { emitted } = play(other, [fault(400, 'trainer-0', { machineFaulty: true })]);
    expect(decidedOf(emitted)).toEqual([['request-new-trainer-machine', 'trainer-machine-faulty']]);
  });
});

describe('rollout fault → replace that machine only', () => {
  it('isolates and replaces the machine; completes when the new machine registers', () => {
    const { emitted } = play(jobAtStep3(), [
      rolloutMachineLost(400, 'rollout-1', { detectionLatencyMs: 70_000 }),
      succeeded(420, 'rollout-1/v400/recovery/1', null, 'rollout-7'),
      register('rollout-7', 'rollout', 425),
    ]);
    expect(emitted).toEqual([
      draft('RecoveryDecided', {
        recoveryId: 'rollout-1/v400/recovery',
        verdictId: 'rollout-1/v400',
        machineId: 'rollout-1',
        action: 'replace-rollout',
        rule: 'rollout-fault',
        step: 3,
        evidence: { detail: 'probe unanswered' },
      }),
      draft('ReplaceMachine', {
        recoveryId: 'rollout-1/v400/recovery',
        commandId: 'rollout-1/v400/recovery/1',
        machineId: 'rollout-1',
        role: 'rollout',
        zone: 'az-1',
        hardwareClass: 'h100x8',
      }),
      draft('RecoveryCompleted', {
        recoveryId: 'rollout-1/v400/recovery',
        outcome: 'recovered',
        stagesMs: { detect: 70_000, decide: 0, restart: 20_000, reconnect: 5_000 },
      }),
    ]);
  });

  it('a second rollout fault in the same step is replaced too, never escalated', () => {
    const { emitted } = play(jobAtStep3(), [rolloutMachineLost(400, 'rollout-0'), rolloutMachineLost(401, 'rollout-1')]);
    expect(decidedOf(emitted)).toEqual([
      ['replace-rollout', 'rollout-fault'],
      ['replace-rollout', 'rollout-fault'],
    ]);
  });
});

describe('rollout engine process fault → restart it in place first, within a budget', () => {
  const restartDecided = (s: number, machineId: string) =>
    draft('RecoveryDecided', {
      recoveryId: `${machineId}/v${s}/recovery`,
      verdictId: `${machineId}/v${s}`,
      machineId,
      action: 'restart-rollout-engine',
      rule: 'rollout-process-fault',
      step: 3,
      evidence: { signal: 'process-exited' },
    });

  it('restarts the engine on its machine, not the machine; completes when the machine registers again', () => {
    const { emitted } = play(jobAtStep3(), [
      engineCrashed(400, 'rollout-1'),
      succeeded(404, 'rollout-1/v400/recovery/1', 'rollout-1'),
      register('rollout-1', 'rollout', 406),
    ]);
    expect(emitted).toEqual([
      restartDecided(400, 'rollout-1'),
      draft('RestartRolloutEngine', {
        recoveryId: 'rollout-1/v400/recovery',
        commandId: 'rollout-1/v400/recovery/1',
        machineId: 'rollout-1',
        attempt: 1,
        budget: 2,
      }),
      draft('RecoveryCompleted', {
        recoveryId: 'rollout-1/v400/recovery',
        outcome: 'recovered',
        stagesMs: { detect: 0, decide: 0, restart: 4000, reconnect: 2000 },
      }),
    ]);
  });

  it('a re-registration that overtakes the answer (another topic) still counts as the engine reporting in', () => {
    const { emitted } = play(jobAtStep3(), [
      engineCrashed(400, 'rollout-1'),
      register('rollout-1', 'rollout', 403),
      succeeded(404, 'rollout-1/v400/recovery/1', 'rollout-1'),
    ]);
    expect(emitted.at(-1)).toMatchObject({ type: 'RecoveryCompleted', data: { outcome: 'recovered' } });
  });

  it('a second crash while the engine restarts is covered by that restart, not a second one', () => {
    const { emitted } = play(jobAtStep3(), [engineCrashed(400, 'rollout-1'), engineCrashed(402, 'rollout-1')]);
    expect(decidedOf(emitted)).toEqual([
      ['restart-rollout-engine', 'rollout-process-fault'],
      ['report-only', 'covered-by-active-recovery'],
    ]);
    expect(types(emitted).filter((t) => t === 'RestartRolloutEngine')).toHaveLength(1);
  });

  const crashAndRecover = (s: number, machineId: string) => [
    engineCrashed(s, machineId),
    succeeded(s + 4, `${machineId}/v${s}/recovery/1`, machineId),
    register(machineId, 'rollout', s + 6),
  ];

  it('past its budget within the window the machine is replaced, and the decision says why', () => {
    const { emitted } = play(jobAtStep3(), [...crashAndRecover(400, 'rollout-1'), ...crashAndRecover(500, 'rollout-1'), engineCrashed(600, 'rollout-1')]);
    expect(decidedOf(emitted)).toEqual([
      ['restart-rollout-engine', 'rollout-process-fault'],
      ['restart-rollout-engine', 'rollout-process-fault'],
      ['replace-rollout', 'rollout-restart-budget-spent'],
    ]);
    const attempts = emitted.filter((d): d is Draft<'RestartRolloutEngine'> => d.type === 'RestartRolloutEngine').map((d) => d.data.attempt);
    expect(attempts).toEqual([1, 2]);
    const last = emitted.filter((d): d is Draft<'RecoveryDecided'> => d.type === 'RecoveryDecided').at(-1)!;
    expect(last.data.evidence.detail).toMatch(/^2 in-place engine restart\(s\) of rollout-1 within 60 min \(budget 2\)/);
    expect(emitted.at(-1)).toEqual(
      draft('ReplaceMachine', {
        recoveryId: 'rollout-1/v600/recovery',
        commandId: 'rollout-1/v600/recovery/1',
        machineId: 'rollout-1',
        role: 'rollout',
        zone: 'az-1',
        hardwareClass: 'h100x8',
      }),
    );
  });

  it('restarts older than the window no longer count; other machines have budgets of their own', () => {
    const { emitted } = play(jobAtStep3(), [
      ...crashAndRecover(400, 'rollout-1'),
      ...crashAndRecover(500, 'rollout-1'),
      engineCrashed(4050, 'rollout-1'),
      engineCrashed(4200, 'rollout-0'),
    ]);
    expect(decidedOf(emitted).map(([action]) => action)).toEqual([
      'restart-rollout-engine',
      'restart-rollout-engine',
      'restart-rollout-engine',
      'restart-rollout-engine',
    ]);
    const attempts = emitted
      .filter((d): d is Draft<'RestartRolloutEngine'> => d.type === 'RestartRolloutEngine')
      .map((d) => [d.data.machineId, d.data.attempt]);
    expect(attempts).toEqual([
      ['rollout-1', 1],
      ['rollout-1', 2],
      ['rollout-1', 2], // the restart at 400 s left the window; the one at 500 s is still in it
      ['rollout-0', 1],
    ]);
  });

  it('an engine that does not come back replaces its machine: a failed restart, or one with no answer in time', () => {
    const failedOnce = play(jobAtStep3(), [engineCrashed(400, 'rollout-1'), failed(420, 'rollout-1/v400/recovery/1', 'rollout-1')]);
    expect(decidedOf(failedOnce.emitted)).toEqual([
      ['restart-rollout-engine', 'rollout-process-fault'],
      ['replace-rollout', 'rollout-engine-restart-failed'],
    ]);
    expect(failedOnce.emitted.at(-1)).toMatchObject({ type: 'ReplaceMachine', data: { commandId: 'rollout-1/v400/recovery/2', machineId: 'rollout-1' } });

    const silent = play(jobAtStep3(), [engineCrashed(400, 'rollout-1'), { tick: 461 }], createControllerDecider({ commandTimeoutMs: 60_000 }));
    expect(types(silent.emitted)).toEqual(['RecoveryDecided', 'RestartRolloutEngine', 'RecoveryCommandFailed', 'RecoveryDecided', 'ReplaceMachine']);
    expect(decidedOf(silent.emitted).at(-1)).toEqual(['replace-rollout', 'rollout-engine-restart-failed']);
  });

  it('the replacement after a failed engine restart may itself fail once and is asked for again', () => {
    const { emitted } = play(jobAtStep3(), [
      engineCrashed(400, 'rollout-1'),
      failed(420, 'rollout-1/v400/recovery/1', 'rollout-1'),
      failed(440, 'rollout-1/v400/recovery/2', null),
    ]);
    expect(types(emitted)).toEqual(['RecoveryDecided', 'RestartRolloutEngine', 'RecoveryDecided', 'ReplaceMachine', 'RecoveryDecided', 'ReplaceMachine']);
  });

  it('hardware evidence, an unknown machine or a budget of 0 skip the in-place restart', () => {
    expect(decidedOf(play(jobAtStep3(), [rolloutMachineLost(400, 'rollout-1')]).emitted)).toEqual([['replace-rollout', 'rollout-fault']]);
    expect(decidedOf(play(jobAtStep3(), [engineCrashed(400, 'rollout-9')]).emitted)).toEqual([['replace-rollout', 'rollout-fault']]);
    const noBudget = createControllerDecider({ engineRestartBudget: 0 });
    expect(decidedOf(play(jobAtStep3(), [engineCrashed(400, 'rollout-1')], noBudget).emitted)).toEqual([['replace-rollout', 'rollout-fault']]);
  });
});

describe('commands that get no answer', () => {
  it('a restart with no answer in time fails, naming the silent machine, and the machine is treated as faulty', () => {
    const decider = createControllerDecider({ commandTimeoutMs: 60_000 });
    const { emitted } = play(
      jobAtStep3(),
      [fault(400, 'trainer-1'), succeeded(410, 'trainer-1/v400/recovery/1', 'trainer-0'), { tick: 459 }, { tick: 460 }],
      decider,
    );
    expect(types(emitted)).toEqual([
      'RecoveryDecided',
      'RestartTrainerGroup',
      'RecoveryCommandFailed',
      'RecoveryDecided',
      'PromoteRolloutToTrainer',
      'ReplaceMachine',
    ]);
    expect(emitted[2]).toMatchObject({ data: { machineId: 'trainer-1', executor: 'controller', error: 'no answer from trainer-1 within 60 s' } });
  });
});

describe('rebuilt from the log', () => {
  it('a controller rebuilt from its events mid-recovery issues nothing twice', () => {
    const live = play(jobAtStep3(), [fault(400, 'trainer-1')]);
    const log: ControllerEvent[] = [
      ...jobAtStep3(),
      fault(400, 'trainer-1'),
      ...live.emitted.map((d) => ({ ...d, occurredAt: iso(400) }) as unknown as ControllerEvent),
    ];
    const rebuilt = log.reduce(ControllerDecider.evolve, ControllerDecider.initialState());
    expect(ControllerDecider.decide(observe(fault(400, 'trainer-1')), rebuilt)).toEqual([]);
    expect(rebuilt).toEqual(live.state);
    const next = ControllerDecider.decide(observe(succeeded(410, 'trainer-1/v400/recovery/1', null)), rebuilt);
    expect(next).toEqual([]); // waits for the machines to report in
  });
});
