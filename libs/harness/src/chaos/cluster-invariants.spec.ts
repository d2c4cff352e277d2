import { createMessage, MessageType, RobustrlMessage } from '@robustrl/contracts';
import { everyEscalationNamed, noRecoveryLoop, noSplitBrain, partitionsEndOnce } from './cluster-invariants';
import { classScorecard, formatClassScorecard } from './class-scorecard';

const T0 = Date.parse('2026-01-01T00:00:00Z');
const ev = <T extends MessageType>(s: number, type: T, data: Parameters<typeof createMessage<T>>[1]): RobustrlMessage =>
  createMessage(type, data, { jobId: 'j', source: 'spec', occurredAt: new Date(T0 + s * 1000).toISOString() }) as RobustrlMessage;

const verdict = (s: number, machineId: string, handledAs: 'trainer' | 'rollout' = 'trainer', latencyMs = 2_000) =>
  ev(s, 'FaultConfirmed', {
    verdictId: `${machineId}/v${s}`,
    machineId,
    role: handledAs,
    rule: 'explicit-signal',
    handledAs,
    machineFaulty: false,
    detectionLatencyMs: latencyMs,
    evidence: { signal: 'process-exited' },
  });
const decided = (s: number, machineId: string, verdictAt: number, action: string, rule: string, evidence: Record<string, unknown> = { detail: 'why' }) =>
  ev(s, 'RecoveryDecided', {
    recoveryId: `${machineId}/v${verdictAt}/recovery`,
    verdictId: `${machineId}/v${verdictAt}`,
    machineId,
    action: action as never,
    rule: rule as never,
    step: 3,
    evidence,
  });
const restartTask = (s: number, machineId: string, verdictAt: number, rule: string) =>
  ev(s, 'RestartTask', { recoveryId: `${machineId}/v${verdictAt}/recovery`, commandId: `${machineId}/v${verdictAt}/recovery/1`, rule: rule as never });
const completed = (s: number, machineId: string, verdictAt: number) =>
  ev(s, 'RecoveryCompleted', {
    recoveryId: `${machineId}/v${verdictAt}/recovery`,
    outcome: 'recovered',
    stagesMs: { detect: 0, decide: 0, restart: 0, reconnect: 0 },
  });

const budgets = { machineRestartBudget: 2, machineRestartWindowMs: 3_600_000, engineRestartBudget: 2, engineRestartWindowMs: 3_600_000 };

/** trainer-1 restarted in place, then by a task restart (rule 2), then retired: within its budget of 2. */
const retired = [
  verdict(10, 'trainer-1'),
  decided(10, 'trainer-1', 10, 'restart-trainer-group', 'trainer-fault'),
  verdict(20, 'trainer-1'),
  decided(20, 'trainer-1', 20, 'restart-task', 'escalate-repeated-fault-in-step'),
  restartTask(20, 'trainer-1', 20, 'escalate-repeated-fault-in-step'),
  verdict(40, 'trainer-1'),
  decided(40, 'trainer-1', 40, 'warm-standby-from-rollout', 'machine-restart-budget-spent'),
];

describe('no recovery loop', () => {
  it('holds when the machine past its budget was retired', () => {
    expect(noRecoveryLoop(retired, budgets)).toMatchObject({ ok: true });
  });

  it('fails for a machine restarted a third time within the window, naming it', () => {
    const looping = [...retired.slice(0, 6), decided(40, 'trainer-1', 40, 'restart-task', 'escalate-first-iteration')];
    const check = noRecoveryLoop(looping, budgets);
    expect(check).toMatchObject({ ok: false });
    expect(check.detail).toMatch(/trainer-1: 3 trainer restarts within 60 min \(budget 2\)/);
    // The same restarts spread past the window are no loop.
    expect(noRecoveryLoop(looping, { ...budgets, machineRestartWindowMs: 15_000 })).toMatchObject({ ok: true });
  });

  it('does not charge a machine for a trainer its agent stopped on a lost lease (a partition, not the machine)', () => {
    const cut = [verdict(5, 'trainer-1'), decided(5, 'trainer-1', 5, 'restart-trainer-group', 'trainer-fault', { signal: 'lease-expired' })];
    expect(noRecoveryLoop([...cut, ...retired.slice(0, 4)], budgets)).toMatchObject({ ok: true });
    // The same restart for a fault of the machine's own is a third one.
    const own = [verdict(5, 'trainer-1'), decided(5, 'trainer-1', 5, 'restart-trainer-group', 'trainer-fault', { signal: 'process-exited' })];
    expect(noRecoveryLoop([...own, ...retired.slice(0, 4)], budgets)).toMatchObject({ ok: false });
  });

  it('counts rollout engines restarted in place against their own budget, and ignores a rollout fault restarting the task', () => {
    const engine = (s: number) => ev(s, 'RestartRolloutEngine', { recoveryId: `r${s}`, commandId: `r${s}/1`, machineId: 'rollout-0', attempt: 1, budget: 2 });
    expect(noRecoveryLoop([engine(1), engine(2)], budgets)).toMatchObject({ ok: true });
    expect(noRecoveryLoop([engine(1), engine(2), engine(3)], budgets)).toMatchObject({ ok: false });
    const rolloutEscalations = [1, 2, 3].flatMap((s) => [
      verdict(s, 'rollout-0', 'rollout'),
      decided(s, 'rollout-0', s, 'restart-task', 'escalate-first-iteration'),
    ]);
    expect(noRecoveryLoop(rolloutEscalations, budgets)).toMatchObject({ ok: true });
  });
});

describe('every escalation names its rule and the evidence', () => {
  it('holds for a task restart under rule 2 with its evidence and a command saying so', () => {
    expect(everyEscalationNamed(retired)).toMatchObject({ ok: true, detail: '1 escalation(s): escalate-repeated-fault-in-step 1' });
  });

  it('fails for an escalation without evidence, under a rule that is not one, or a command that says another rule', () => {
    const bare = [verdict(20, 'trainer-1'), decided(20, 'trainer-1', 20, 'restart-task', 'escalate-restart-failed-twice', {})];
    expect(everyEscalationNamed(bare).detail).toMatch(/names no evidence/);
    const unnamed = [decided(20, 'trainer-1', 20, 'restart-task', 'trainer-fault')];
    expect(everyEscalationNamed(unnamed).detail).toMatch(/not an escalation rule/);
    const mismatched = [
      decided(20, 'trainer-1', 20, 'restart-task', 'escalate-first-iteration'),
      restartTask(20, 'trainer-1', 20, 'escalate-restart-failed-twice'),
    ];
    expect(everyEscalationNamed(mismatched).detail).toMatch(/says escalate-restart-failed-twice, its decision escalate-first-iteration/);
    expect(everyEscalationNamed([restartTask(20, 'x', 20, 'escalate-first-iteration')]).detail).toMatch(/without a task-restart decision/);
  });
});

describe('no split brain', () => {
  const trained = (at: number, rank: number, pid: number) => ({ kind: 'trained', at, rank, pid, step: at });
  it('holds while the processes of a rank take turns', () => {
    expect(noSplitBrain([trained(1, 0, 10), trained(2, 0, 10), trained(3, 0, 11), trained(4, 0, 11), trained(1, 1, 20)])).toMatchObject({ ok: true });
  });
  it('fails when a process trains its rank again after its replacement did', () => {
    const check = noSplitBrain([trained(1, 0, 10), trained(3, 0, 11), trained(4, 0, 10)]);
    expect(check).toMatchObject({ ok: false });
    expect(check.detail).toMatch(/rank 0: process 10 trained again after another process had taken the rank/);
  });
});

describe('every partition ends once', () => {
  const span = { machineId: 'trainer-1', kind: 'partition-full', from: T0 + 10_000, to: T0 + 40_000 };
  it('holds for a partition healed with no recovery and for one ended in a single recovery', () => {
    expect(partitionsEndOnce([], [span], 10_000)).toMatchObject({ ok: true, detail: '1 partition(s): 1 healed with no recovery, 0 ended in one recovery' });
    const one = [verdict(25, 'trainer-1'), decided(25, 'trainer-1', 25, 'warm-standby-from-rollout', 'trainer-machine-faulty')];
    expect(partitionsEndOnce(one, [span], 10_000)).toMatchObject({ ok: true, detail: '1 partition(s): 0 healed with no recovery, 1 ended in one recovery' });
  });
  it('fails for a second recovery of the machine after the heal, naming both', () => {
    const two = [
      decided(25, 'trainer-1', 25, 'warm-standby-from-rollout', 'trainer-machine-faulty'),
      decided(45, 'trainer-1', 45, 'restart-trainer-group', 'trainer-fault'),
      decided(90, 'trainer-1', 90, 'restart-trainer-group', 'trainer-fault'),
    ];
    const check = partitionsEndOnce(two, [span], 10_000);
    expect(check.ok).toBe(false);
    expect(check.detail).toContain('partition-full of trainer-1 (30 s): 2 recoveries (trainer-1/v25/recovery, trainer-1/v45/recovery)');
  });
});

describe('the per-class scorecard', () => {
  it('gives each class what happened from its injection until the next: verdicts, decisions, times, retried steps, ledger GPU-hours', () => {
    const events = [
      ev(5, 'TrainingStepStarted', { step: 3, batchId: 'b3', startedAt: new Date(T0 + 5_000).toISOString() }),
      // The other rank announces the same step: not a retry.
      { ...ev(5, 'TrainingStepStarted', { step: 3, batchId: 'b3', startedAt: new Date(T0 + 5_000).toISOString() }), source: 'agent/trainer-1' },
      ...retired.slice(0, 2),
      completed(16, 'trainer-1', 10),
      ev(17, 'TrainingStepStarted', { step: 3, batchId: 'b3', startedAt: new Date(T0 + 17_000).toISOString() }),
      verdict(31, 'rollout-2', 'rollout', 4_000),
      decided(31, 'rollout-2', 31, 'replace-rollout', 'rollout-fault'),
      completed(50, 'rollout-2', 31),
      // Only its type and time count here.
      { ...ev(32, 'TrainingStepCompleted', { step: 0, batchId: 'b0', durationMs: 1 }), type: 'TrajectoryRestartedFromPrompt' } as unknown as RobustrlMessage,
    ];
    const rows = classScorecard(
      [
        { kind: 'kill-trainer-process', target: 'trainer-1', at: T0 + 9_000 },
        { kind: 'rack', target: 'trainer-0+rollout-2', at: T0 + 30_000 },
        { kind: 'kill-service', target: 'none', at: T0 + 60_000 },
      ],
      events,
      [
        { outageId: 'trainer-1/v10', gpuHours: 0.5 },
        { outageId: 'rollout-2/v31', gpuHours: 0.25 },
        { outageId: null, gpuHours: 9 },
      ],
    );
    expect(rows).toEqual([
      {
        kind: 'kill-trainer-process',
        count: 1,
        verdicts: 1,
        decisions: { 'trainer-fault': 1 },
        detectSeconds: { p50: 2, max: 2 },
        recoverSeconds: { p50: 8, max: 8 },
        decideSeconds: { p50: 2, max: 2 },
        regeneratedTrajectories: 0,
        retriedSteps: 1,
        gpuHoursLost: 0.5,
      },
      {
        kind: 'rack',
        count: 1,
        verdicts: 1,
        decisions: { 'rollout-fault': 1 },
        detectSeconds: { p50: 4, max: 4 },
        recoverSeconds: { p50: 23, max: 23 },
        decideSeconds: { p50: 4, max: 4 },
        regeneratedTrajectories: 1,
        retriedSteps: 0,
        gpuHoursLost: 0.25,
      },
    ]);
    expect(formatClassScorecard(rows)).toContain('| rack | 1 | 1 | rollout-fault: 1 | 4 / 4 | 23 / 23 | 1 | 0 | 0.25 |');
  });
});
