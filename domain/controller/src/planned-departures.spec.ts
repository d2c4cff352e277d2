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
    // The standby is promoted at once; the machine stays in the group until step 3 is saved.
    expect(types(emitted)).toEqual(['RecoveryDecided', 'PromoteRolloutToTrainer']);
    expect(emitted[0]!.data).toMatchObject({
      evidence: { departsAt: iso(430), detail: 'planned departure, departs in 30 s; spot interruption notice; moved at the checkpoint of step 3' },
      // A tenth of the 30 s left before the deadline: the agent stops its roles about then.
      handover: { checkpointStep: 3, by: iso(427), status: 'waiting' },
    });
  });

  describe('a departing trainer moves at the checkpoint of its step', () => {
    const RECOVERY = 'trainer-1/v400/recovery';
    const restartOf = (emitted: ReturnType<typeof play>['emitted']) => emitted.find((d) => d.type === 'RestartTrainerGroup')!.data;

    it('the checkpoint comes after the standby is promoted: the group restarts at the next step, none retried', () => {
      const { emitted } = play(jobAtStep3(), [
        notice(400, 'trainer-1', 'trainer', 430),
        succeeded(405, `${RECOVERY}/1`, 'rollout-0'),
        msg(410, 'CheckpointSaved', { step: 3, uri: 'file:///ckpt/3', blockingMs: 800 }),
      ]);
      expect(types(emitted)).toEqual(['RecoveryDecided', 'PromoteRolloutToTrainer', 'RecoveryDecided', 'ReplaceMachine', 'RestartTrainerGroup']);
      expect(emitted[2]!.data).toMatchObject({
        handover: { checkpointStep: 3, status: 'saved' },
        evidence: { detail: expect.stringMatching(/no step retried/) },
      });
      // The machine leaves the pool only now: refilled as a rollout.
      expect(emitted[3]!.data).toMatchObject({ machineId: 'trainer-1', role: 'rollout' });
      expect(restartOf(emitted)).toMatchObject({ machines: ['trainer-0', 'rollout-0'], step: 4, checkpointStep: 3 });
      expect(restartOf(emitted)).not.toHaveProperty('batchId');
    });

    it('the checkpoint comes first: the group restarts when the standby is ready', () => {
      const { emitted } = play(jobAtStep3(), [
        notice(400, 'trainer-1', 'trainer', 430),
        msg(403, 'CheckpointSaved', { step: 3, uri: 'file:///ckpt/3', blockingMs: 800 }),
        succeeded(406, `${RECOVERY}/1`, 'rollout-0'),
      ]);
      expect(types(emitted)).toEqual(['RecoveryDecided', 'PromoteRolloutToTrainer', 'RecoveryDecided', 'ReplaceMachine', 'RestartTrainerGroup']);
      expect(restartOf(emitted)).toMatchObject({ step: 4, checkpointStep: 3 });
    });

    it('no checkpoint by the handover deadline: the group moves then, and the step is retried on its batch', () => {
      const { emitted } = play(jobAtStep3(), [
        notice(400, 'trainer-1', 'trainer', 430),
        succeeded(405, `${RECOVERY}/1`, 'rollout-0'),
        { tick: 426 },
        { tick: 427 },
      ]);
      expect(types(emitted)).toEqual(['RecoveryDecided', 'PromoteRolloutToTrainer', 'RecoveryDecided', 'ReplaceMachine', 'RestartTrainerGroup']);
      expect(emitted[2]!.data).toMatchObject({ handover: { status: 'given-up' }, evidence: { detail: expect.stringMatching(/step 3 is retried/) } });
      expect(restartOf(emitted)).toMatchObject({ step: 3, checkpointStep: 2, batchId: 'b3' });
    });

    it('the machine fails while its group waits: the group moves now', () => {
      const { emitted } = play(jobAtStep3(), [notice(400, 'trainer-1', 'trainer', 430), succeeded(405, `${RECOVERY}/1`, 'rollout-0'), fault(412, 'trainer-1')]);
      expect(decidedOf(emitted)).toEqual([
        ['warm-standby-from-rollout', 'planned-trainer-departure'],
        ['report-only', 'covered-by-active-recovery'],
        ['warm-standby-from-rollout', 'planned-trainer-departure'],
      ]);
      expect(emitted.filter((d) => d.type === 'RecoveryDecided')[2]!.data).toMatchObject({ handover: { status: 'given-up' } });
      expect(restartOf(emitted)).toMatchObject({ step: 3, checkpointStep: 2 });
      // A second notice for it changes nothing.
      const again = play(jobAtStep3(), [notice(400, 'trainer-1', 'trainer', 430), notice(402, 'trainer-1', 'trainer', 430)]);
      expect(decidedOf(again.emitted)).toEqual([
        ['warm-standby-from-rollout', 'planned-trainer-departure'],
        ['report-only', 'covered-by-active-recovery'],
      ]);
    });

    it('without a standby (sync mode) the machine is replaced once the step is saved, and the new machine joins at the next step', () => {
      const { emitted } = play(jobAtStep3('sync'), [
        notice(400, 'trainer-1', 'trainer', 430),
        msg(410, 'CheckpointSaved', { step: 3, uri: 'file:///ckpt/3', blockingMs: 800 }),
        succeeded(420, `${RECOVERY}/1`, null, 'trainer-9'),
      ]);
      expect(decidedOf(emitted)).toEqual([
        ['request-new-trainer-machine', 'planned-trainer-departure'],
        ['request-new-trainer-machine', 'planned-trainer-departure'],
      ]);
      expect(types(emitted)).toEqual(['RecoveryDecided', 'RecoveryDecided', 'ReplaceMachine', 'RestartTrainerGroup']);
      expect(emitted[2]!.data).toMatchObject({ machineId: 'trainer-1', role: 'hybrid' });
      expect(restartOf(emitted)).toMatchObject({ machines: ['trainer-0', 'trainer-9'], step: 4, checkpointStep: 3 });
    });

    it('a notice too short to wait, or a step that would end after the deadline, moves the group now and says why', () => {
      const short = play(jobAtStep3(), [notice(400, 'trainer-1', 'trainer', 401)]);
      expect(types(short.emitted)).toEqual(['RecoveryDecided', 'PromoteRolloutToTrainer', 'ReplaceMachine']);
      expect(short.emitted[0]!.data).toMatchObject({
        evidence: { detail: expect.stringMatching(/moved now: 1 s left is too short to wait for a checkpoint$/) },
      });
      expect(short.emitted[0]!.data).not.toHaveProperty('handover');
      // Step 3 began at 301 and the last step took 49 s (and 0.9 s to save): with a notice at 302 it would end well after 320.
      const long = play(jobAtStep3(), [notice(302, 'trainer-1', 'trainer', 320)]);
      expect(long.emitted[0]!.data).toMatchObject({
        evidence: { detail: expect.stringMatching(/moved now: step 3 would be saved about 3\d s after the handover deadline$/) },
      });
      // No deadline, or the step in progress already saved: nothing to wait for.
      expect(play(jobAtStep3(), [notice(400, 'trainer-1', 'trainer')]).emitted[0]!.data).toMatchObject({
        evidence: { detail: expect.stringMatching(/moved now: the notice gives no deadline/) },
      });
      const saved = play(
        [...jobAtStep3(), msg(350, 'CheckpointSaved', { step: 3, uri: 'file:///ckpt/3', blockingMs: 800 })],
        [notice(400, 'trainer-1', 'trainer', 430)],
      );
      expect(saved.emitted[0]!.data).toMatchObject({
        evidence: { detail: expect.stringMatching(/moved now: no step is in progress since the last checkpoint/) },
      });
    });
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
