import { iso } from '@robustrl/testing/job-timeline';
import { decidedOf, fault, jobAtStep3, msg, phase, play, register, succeeded, types } from './spec-support/controller-story';
import { departureEvidence, plannedDeparture } from './planned-departures';

/** A drain or preemption notice on `machineId`, confirmed at second `s`, the machine leaving at second `leaves`. */
const notice = (s: number, machineId: string, role: 'trainer' | 'rollout', leaves?: number) =>
  fault(s, machineId, {
    role,
    handledAs: role,
    machineFaulty: true,
    evidence: { signal: 'node-draining', detail: 'spot interruption notice', ...(leaves !== undefined ? { departsAt: iso(leaves) } : {}) },
  });

describe('a machine that announced its departure', () => {
  it('is named by its signal, whatever its role', () => {
    expect(plannedDeparture({ signal: 'node-draining' }, 'trainer')).toBe('planned-trainer-departure');
    expect(plannedDeparture({ signal: 'node-draining' }, 'rollout')).toBe('planned-rollout-departure');
    expect(plannedDeparture({ signal: 'xid-error' }, 'trainer')).toBeNull();
    expect(plannedDeparture({}, 'rollout')).toBeNull();
  });

  it('the decision says how long the machine had left, or that its deadline passed', () => {
    const now = Date.parse(iso(100));
    expect(departureEvidence({ signal: 'node-draining', departsAt: iso(130), detail: 'drain' }, now).detail).toBe('planned departure, departs in 30 s; drain');
    expect(departureEvidence({ signal: 'node-draining', departsAt: iso(90) }, now).detail).toBe(
      'planned departure, its deadline passed 10 s before the decision; node-draining',
    );
    expect(departureEvidence({ signal: 'node-draining' }, now).detail).toMatch(/^planned departure, no deadline given/);
  });

  it('a trainer machine: a warm standby takes its place, the step goes on from the checkpoint', () => {
    const { emitted } = play(jobAtStep3(), [notice(400, 'trainer-1', 'trainer', 430)]);
    expect(decidedOf(emitted)).toEqual([['warm-standby-from-rollout', 'planned-trainer-departure']]);
    expect(types(emitted)).toEqual(['RecoveryDecided', 'PromoteRolloutToTrainer', 'ReplaceMachine']);
    expect(emitted[0]!.data).toMatchObject({ evidence: { departsAt: iso(430), detail: 'planned departure, departs in 30 s; spot interruption notice' } });
  });

  it('a rollout machine: replaced, never the task restarted', () => {
    const { emitted } = play(jobAtStep3(), [notice(400, 'rollout-1', 'rollout', 520)]);
    expect(decidedOf(emitted)).toEqual([['replace-rollout', 'planned-rollout-departure']]);
    expect(types(emitted)).toEqual(['RecoveryDecided', 'ReplaceMachine']);
  });

  it('in the first iteration a notice moves one role: the escalation rules look for faults of code, and a notice is none', () => {
    const fresh = [
      msg(0, 'JobStarted', { mode: 'async', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 2 }),
      register('trainer-0', 'trainer'),
      register('rollout-0', 'rollout'),
      register('rollout-1', 'rollout'),
    ];
    const trainer = play(fresh, [notice(10, 'trainer-0', 'trainer', 40)]);
    expect(decidedOf(trainer.emitted)).toEqual([['warm-standby-from-rollout', 'planned-trainer-departure']]);
    expect(types(trainer.emitted)).not.toContain('RestartTask');
    const rollout = play(fresh, [notice(10, 'rollout-1', 'rollout', 40)]);
    expect(decidedOf(rollout.emitted)).toEqual([['replace-rollout', 'planned-rollout-departure']]);
    // The same machine failing without a notice restarts the task (rule 1).
    expect(decidedOf(play(fresh, [fault(10, 'trainer-0')]).emitted)).toEqual([['restart-task', 'escalate-first-iteration']]);
  });

  it('after another trainer fault in the same step, a notice still moves the one machine (no rule 2)', () => {
    const { emitted } = play(jobAtStep3(), [
      fault(400, 'trainer-1'),
      succeeded(430, 'trainer-1/v400/recovery/1', 'trainer-0'),
      succeeded(431, 'trainer-1/v400/recovery/1', 'trainer-1'),
      phase(432, 'trainer-0'),
      phase(433, 'trainer-1'),
      notice(440, 'trainer-0', 'trainer', 470),
    ]);
    expect(decidedOf(emitted)).toEqual([
      ['restart-trainer-group', 'trainer-fault'],
      ['warm-standby-from-rollout', 'planned-trainer-departure'],
    ]);
  });

  it('a notice on a machine a recovery already covers is recorded, not acted on twice', () => {
    const { emitted } = play(jobAtStep3(), [notice(400, 'rollout-1', 'rollout', 520), notice(401, 'rollout-1', 'rollout', 520)]);
    expect(decidedOf(emitted)).toEqual([
      ['replace-rollout', 'planned-rollout-departure'],
      ['report-only', 'covered-by-active-recovery'],
    ]);
  });
});
