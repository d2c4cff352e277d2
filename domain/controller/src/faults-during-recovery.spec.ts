import { Draft } from '@robustrl/contracts';
import { createControllerDecider } from './controller.decider';
import { at } from '@robustrl/testing/job-timeline';
import { decidedOf, fault, jobAtStep3, msg, phase, play, register, succeeded } from './spec-support/controller-story';

/**
 * Faults as clusters have them (DESIGN §Recovery): a machine that fails on every restart, several
 * machines lost at once, and a machine lost while a recovery already waits on it. Each must end in a
 * decision now, named by its rule — never in a loop of restarts nor a wait for a command timeout.
 */

/** Seconds of the timeline's epoch (job-timeline's `at(0)`), to read a message's second back. */
const at0 = at(0) / 1000;
const machineLost = (s: number, machineId: string, role: 'trainer' | 'rollout' = 'trainer') =>
  fault(s, machineId, { role, handledAs: role, rule: 'agent-silent', machineFaulty: true, evidence: { detail: 'no report from the agent' } });
const failures = (ds: Draft[]) => ds.filter((d): d is Draft<'RecoveryCommandFailed'> => d.type === 'RecoveryCommandFailed').map((d) => d.data);
const promotions = (ds: Draft[]) =>
  ds.filter((d): d is Draft<'PromoteRolloutToTrainer'> => d.type === 'PromoteRolloutToTrainer').map((d) => [d.data.rolloutMachineId, d.data.replacesMachineId]);

/** trainer-1's trainer fails again and again: restarted in place, then the task (rule 2), then the job resumes (rule 1 would fire next). */
function flapping() {
  return [
    fault(400, 'trainer-1'),
    succeeded(401, 'trainer-1/v400/recovery/1', 'trainer-0'),
    succeeded(401, 'trainer-1/v400/recovery/1', 'trainer-1'),
    phase(402, 'trainer-0'),
    phase(402, 'trainer-1'),
    fault(410, 'trainer-1'),
    succeeded(415, 'trainer-1/v410/recovery/1', null),
    msg(416, 'JobStarted', { mode: 'semi-sync', resumedFromStep: 2, trainerMachines: 2, rolloutMachines: 3 }),
    register('trainer-0', 'trainer', 418),
    register('trainer-1', 'trainer', 418),
    fault(430, 'trainer-1'),
  ];
}

describe('a machine that fails on every restart is retired after its budget', () => {
  it('restart in place, task restart (rule 2), then retired by warm standby: the decision names the budget', () => {
    const { emitted } = play(jobAtStep3(), flapping());
    expect(decidedOf(emitted)).toEqual([
      ['restart-trainer-group', 'trainer-fault'],
      ['restart-task', 'escalate-repeated-fault-in-step'],
      ['warm-standby-from-rollout', 'machine-restart-budget-spent'],
    ]);
    const retired = emitted.filter((d): d is Draft<'RecoveryDecided'> => d.type === 'RecoveryDecided').at(-1)!;
    expect(retired.data.evidence.detail).toMatch(/^2 restart\(s\) of trainer-1 for its own faults within 60 min \(budget 2\)/);
    expect(promotions(emitted)).toEqual([['rollout-0', 'trainer-1']]);
    expect(emitted.filter((d) => d.type === 'ReplaceMachine').map((d) => (d as Draft<'ReplaceMachine'>).data.machineId)).toEqual(['trainer-1']);
  });

  it('without a budget the same machine restarts the task again and again (rule 1 after each resume): the loop the budget breaks', () => {
    const { emitted } = play(jobAtStep3(), flapping(), createControllerDecider({ machineRestartBudget: 0 }));
    expect(decidedOf(emitted).at(-1)).toEqual(['restart-task', 'escalate-first-iteration']);
  });

  it('restarts older than the window do not count', () => {
    const { emitted } = play(jobAtStep3(), flapping(), createControllerDecider({ machineRestartWindowMs: 10_000 }));
    expect(decidedOf(emitted).at(-1)).toEqual(['restart-task', 'escalate-first-iteration']);
  });

  it('a trainer its agent stopped for a lost broker (lease-expired) neither spends the budget nor is retired by it', () => {
    const leased = (s: number) => fault(s, 'trainer-1', { evidence: { signal: 'lease-expired' } });
    const history = flapping().map((m) =>
      m.type === 'FaultConfirmed' && m.data.verdictId !== 'trainer-1/v430' ? leased(Date.parse(m.occurredAt) / 1000 - at0) : m,
    );
    expect(decidedOf(play(jobAtStep3(), history).emitted).at(-1)).toEqual(['restart-task', 'escalate-first-iteration']);
    const lastLeased = flapping().map((m) => (m.type === 'FaultConfirmed' && m.data.verdictId === 'trainer-1/v430' ? leased(430) : m));
    expect(decidedOf(play(jobAtStep3(), lastLeased).emitted).at(-1)).toEqual(['restart-task', 'escalate-first-iteration']);
  });

  it("another machine's faults do not spend its budget", () => {
    const other = flapping().map((m) => (m.type === 'FaultConfirmed' && m.data.verdictId === 'trainer-1/v430' ? fault(430, 'trainer-0') : m));
    expect(decidedOf(play(jobAtStep3(), other).emitted).at(-1)).toEqual(['restart-task', 'escalate-first-iteration']);
  });
});

describe('a machine lost while a recovery is open re-plans it at once', () => {
  it('a rack of two trainers: the second, lost while the first is replaced, fails the restart as soon as it is issued — a second standby, no timeout', () => {
    const { emitted } = play(jobAtStep3(), [
      machineLost(400, 'trainer-0'),
      machineLost(404, 'trainer-1'),
      succeeded(406, 'trainer-0/v400/recovery/1', 'rollout-0'),
    ]);
    expect(decidedOf(emitted)).toEqual([
      ['warm-standby-from-rollout', 'trainer-machine-faulty'],
      ['report-only', 'covered-by-active-recovery'],
      ['warm-standby-from-rollout', 'trainer-machine-faulty'],
    ]);
    expect(failures(emitted)).toEqual([
      expect.objectContaining({
        commandId: 'trainer-0/v400/recovery/3',
        machineId: 'trainer-1',
        durationMs: 0,
        error: 'trainer-1 was confirmed faulty before the restart was issued',
      }),
    ]);
    expect(promotions(emitted)).toEqual([
      ['rollout-0', 'trainer-0'],
      ['rollout-1', 'trainer-1'],
    ]);
    // The second standby promoted: the group restarts on the two standbys, nothing waits on a dead machine.
    const { emitted: after } = play(jobAtStep3(), [
      machineLost(400, 'trainer-0'),
      machineLost(404, 'trainer-1'),
      succeeded(406, 'trainer-0/v400/recovery/1', 'rollout-0'),
      succeeded(408, 'trainer-0/v400/recovery/4', 'rollout-1'),
    ]);
    expect(after.at(-1)).toMatchObject({ type: 'RestartTrainerGroup', data: { machines: ['rollout-0', 'rollout-1'] } });
  });

  it('a machine lost after its restart succeeded, before it reported in, is replaced now; the recovery completes only once the re-formed group reported in', () => {
    const lostInReconnect = [
      fault(400, 'trainer-0'),
      succeeded(401, 'trainer-0/v400/recovery/1', 'trainer-0'),
      succeeded(401, 'trainer-0/v400/recovery/1', 'trainer-1'),
      phase(402, 'trainer-0'),
      machineLost(410, 'trainer-1'),
    ];
    const { emitted } = play(jobAtStep3(), lostInReconnect);
    expect(decidedOf(emitted)).toEqual([
      ['restart-trainer-group', 'trainer-fault'],
      ['report-only', 'covered-by-active-recovery'],
      ['warm-standby-from-rollout', 'trainer-machine-faulty'],
    ]);
    expect(promotions(emitted)).toEqual([['rollout-0', 'trainer-1']]);
    // trainer-0 reporting again while the standby is promoted does not complete the recovery: its group is not restarted yet.
    const { emitted: after } = play(jobAtStep3(), [
      ...lostInReconnect,
      phase(411, 'trainer-0'),
      succeeded(412, 'trainer-0/v400/recovery/2', 'rollout-0'),
      succeeded(413, 'trainer-0/v400/recovery/4', 'trainer-0'),
      succeeded(413, 'trainer-0/v400/recovery/4', 'rollout-0'),
      phase(414, 'trainer-0'),
      phase(415, 'rollout-0'),
    ]);
    const restarts = after.filter((d) => d.type === 'RestartTrainerGroup').map((d) => (d as Draft<'RestartTrainerGroup'>).data.machines);
    expect(restarts).toEqual([
      ['trainer-0', 'trainer-1'],
      ['trainer-0', 'rollout-0'],
    ]);
    const done = after.filter((d): d is Draft<'RecoveryCompleted'> => d.type === 'RecoveryCompleted');
    expect(done.map((d) => d.data.recoveryId)).toEqual(['trainer-0/v400/recovery']);
    expect(after.indexOf(done[0])).toBe(after.length - 1);
  });

  it('a standby whose promotion goes unanswered until a rollout rule confirms it lost fails the promotion; the new machine replaces the one it was to replace', () => {
    const { emitted } = play(jobAtStep3(), [
      fault(400, 'trainer-0'),
      succeeded(401, 'trainer-0/v400/recovery/1', 'trainer-0'),
      succeeded(401, 'trainer-0/v400/recovery/1', 'trainer-1'),
      phase(402, 'trainer-0'),
      machineLost(410, 'trainer-1'),
      fault(425, 'rollout-0', { role: 'rollout', handledAs: 'rollout', rule: 'rollout-silent', machineFaulty: true, evidence: { detail: 'probe unanswered' } }),
    ]);
    expect(failures(emitted)).toEqual([expect.objectContaining({ commandId: 'trainer-0/v400/recovery/2', machineId: 'rollout-0' })]);
    expect(decidedOf(emitted).at(-1)).toEqual(['request-new-trainer-machine', 'trainer-machine-faulty']);
    expect(emitted.at(-1)).toMatchObject({ type: 'ReplaceMachine', data: { machineId: 'trainer-1', role: 'trainer' } });
  });

  it('a machine confirmed lost that registers again is alive: the restart waits on it as on any member', () => {
    const { emitted } = play(jobAtStep3(), [
      machineLost(400, 'trainer-0'),
      machineLost(404, 'trainer-1'),
      register('trainer-1', 'trainer', 405),
      succeeded(406, 'trainer-0/v400/recovery/1', 'rollout-0'),
    ]);
    expect(failures(emitted)).toEqual([]);
    expect(emitted.at(-1)).toMatchObject({ type: 'RestartTrainerGroup', data: { machines: ['trainer-1', 'rollout-0'] } });
  });

  it('the standby lost during its promotion fails the promotion at once (the liveness rule, whatever its role)', () => {
    const { emitted } = play(jobAtStep3(), [machineLost(400, 'trainer-0'), machineLost(403, 'rollout-0', 'rollout')]);
    expect(failures(emitted)).toEqual([
      expect.objectContaining({
        commandId: 'trainer-0/v400/recovery/1',
        machineId: 'rollout-0',
        error: 'rollout-0 confirmed faulty (agent-silent) while the promotion waited on it',
      }),
    ]);
    expect(decidedOf(emitted).at(-1)).toEqual(['request-new-trainer-machine', 'trainer-machine-faulty']);
  });

  it('a trainer restart failing on a lost peer, then the standby lost too: the second failed restart escalates (rule 3)', () => {
    const { emitted } = play(jobAtStep3(), [fault(400, 'trainer-0'), machineLost(404, 'trainer-1'), machineLost(406, 'rollout-0', 'rollout')]);
    expect(decidedOf(emitted)).toEqual([
      ['restart-trainer-group', 'trainer-fault'],
      ['report-only', 'covered-by-active-recovery'],
      ['warm-standby-from-rollout', 'trainer-machine-faulty'],
      ['report-only', 'covered-by-active-recovery'],
      ['restart-task', 'escalate-restart-failed-twice'],
    ]);
    expect(emitted.at(-1)).toMatchObject({ type: 'RestartTask', data: { rule: 'escalate-restart-failed-twice' } });
  });

  it('a rack (a trainer and a rollout lost together): the rollout, suspected but not yet confirmed, is lent only when every other is suspected too', () => {
    const suspected = (s: number, machineId: string) =>
      msg(s, 'FaultSuspected', {
        verdictId: `${machineId}/agent-silent/${s}`,
        machineId,
        role: 'rollout',
        rule: 'agent-silent',
        evidence: { detail: 'no report' },
      });
    const rack = [suspected(398, 'rollout-0'), fault(400, 'trainer-1'), machineLost(404, 'trainer-0')];
    const { emitted } = play(jobAtStep3(), rack);
    expect(promotions(emitted)).toEqual([['rollout-1', 'trainer-0']]);
    // The failing case: without the suspicion the least busy rollout, the lost one, is lent; its loss then fails the promotion (rule 3).
    const unaware = play(jobAtStep3(), rack.slice(1));
    expect(promotions(unaware.emitted)).toEqual([['rollout-0', 'trainer-0']]);
    // Cleared (the probe answered), the suspicion no longer stands in the way.
    const cleared = msg(399, 'SuspicionCleared', {
      verdictId: 'rollout-0/agent-silent/398',
      machineId: 'rollout-0',
      role: 'rollout',
      rule: 'agent-silent',
      evidence: { detail: 'no report' },
      reason: 'the probe was answered',
    });
    expect(promotions(play(jobAtStep3(), [rack[0], cleared, ...rack.slice(1)]).emitted)).toEqual([['rollout-0', 'trainer-0']]);
    // Every rollout of the zone suspected (idle together for a moment): one is lent all the same, not a new machine asked for.
    expect(promotions(play(jobAtStep3(), [suspected(397, 'rollout-1'), ...rack]).emitted)).toEqual([['rollout-0', 'trainer-0']]);
  });
});
