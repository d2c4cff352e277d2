import type { ClassRow } from './class-scorecard';
import { formatPlannedComparison, plannedAgainstUnplanned } from './planned-scorecard';

const row = (kind: string, count: number, gpuHoursLost: number, retriedSteps = 0): ClassRow =>
  ({
    kind,
    count,
    verdicts: count,
    decisions: {},
    detectSeconds: null,
    recoverSeconds: null,
    decideSeconds: null,
    regeneratedTrajectories: 0,
    retriedSteps,
    gpuHoursLost,
  }) as ClassRow;

describe('planned failures against the unplanned loss of the same machine', () => {
  it('compares per fault and per role, and leaves out a kind the campaign lacks', () => {
    const rows = [
      row('kill-trainer-machine', 2, 0.02, 2),
      row('drain-trainer-machine', 4, 0.004, 0),
      row('kill-rollout-machine', 1, 0.01, 0),
      row('preempt-rollout-machine', 2, 0.004),
      row('kill-engine-process', 3, 0.5),
    ];
    expect(plannedAgainstUnplanned(rows)).toEqual([
      { role: 'trainer', planned: 'drain', plannedGpuHours: 0.001, unplannedGpuHours: 0.01, ratio: 0.1, plannedRetriedSteps: 0, unplannedRetriedSteps: 2 },
      { role: 'rollout', planned: 'preempt', plannedGpuHours: 0.002, unplannedGpuHours: 0.01, ratio: 0.2, plannedRetriedSteps: 0, unplannedRetriedSteps: 0 },
    ]);
    expect(formatPlannedComparison(plannedAgainstUnplanned(rows))).toMatch(/drain trainer: 0.001 vs 0.01 killed = 0.1×; steps retried 0 vs 2/);
  });

  it('says nothing without both sides, and no ratio when the loss cost nothing', () => {
    expect(plannedAgainstUnplanned([row('drain-trainer-machine', 1, 0.001)])).toEqual([]);
    expect(plannedAgainstUnplanned([row('kill-rollout-machine', 1, 0), row('drain-rollout-machine', 1, 0)])[0].ratio).toBeNull();
    expect(formatPlannedComparison([])).toBe('');
  });
});
