import { DeciderRun } from '@robustrl/domain-kit';
import { Draft } from '@robustrl/contracts';
import { at, iso, published, timeline } from '@robustrl/testing/job-timeline';
import { DetectorDecider } from './detector.decider';
import { REPORT_LAG_MS, reportTime } from './report-time';

/**
 * A machine whose clock is minutes off (docs/contributors/detection.md): the detector times what a machine reports
 * by when it arrived, so a clock behind does not make a healthy machine silent and a clock ahead does
 * not keep a dead one alive. Each case runs the detector as its host does (`observe` at the arrival)
 * and, as the failing case, with reports timed by the machine's clock alone.
 */
const msg = timeline();
const job = msg(0, 'JobStarted', { mode: 'semi-sync', resumedFromStep: null, trainerMachines: 1, rolloutMachines: 1 });
const registered = msg(0, 'MachineRegistered', {
  machineId: 'trainer-0',
  role: 'trainer',
  zone: 'az-1',
  hardwareClass: 'h100x8',
  gpus: 8,
  agentAddress: 'trainer-0:7070',
  dpRank: 0,
});
/** A sample written `skew` seconds off by the machine's clock, arriving at `s`. */
const sample = (s: number, skew: number) =>
  msg(s + skew, 'GpuActivitySampled', { machineId: 'trainer-0', sampledAt: iso(s + skew), intervalSeconds: 10, tensorActive: 0.6, source: 'emulated' });

/** The machine reports every 10 s from 0 to `lastReport` with its clock `skew` s off; the detector ticks every second until `until`. */
function run(skew: number, lastReport: number, until: number, timedByArrival = true) {
  const decider = timedByArrival ? DetectorDecider : { ...DetectorDecider, observe: undefined };
  const detector = DeciderRun.for(decider, published()).given();
  detector.observe(job, at(0));
  detector.observe(registered, at(0));
  for (let s = 0; s <= until; s++) {
    if (s % 10 === 0 && s <= lastReport) detector.observe(sample(s, skew), at(s));
    detector.tick(at(s));
  }
  return detector.emitted.map(({ now, output }) => [(output as Draft).type, (now - at(0)) / 1000]);
}

describe('a machine whose clock is minutes off', () => {
  it('behind by 4 min and healthy: no suspicion (timed by its clock, its reports read as silence and it was condemned)', () => {
    expect(run(-240, 600, 600)).toEqual([]);
    expect(run(-240, 600, 600, false)).toContainEqual(['FaultConfirmed', expect.any(Number)]);
  });

  it('ahead by 4 min and dead after 100 s: confirmed 70 s after its last report, as with a right clock (timed by its clock, 4 min later)', () => {
    const right = run(0, 100, 600).filter(([type]) => type === 'FaultConfirmed');
    expect(right).toEqual([['FaultConfirmed', 170]]);
    expect(run(240, 100, 600).filter(([type]) => type === 'FaultConfirmed')).toEqual(right);
    expect(run(240, 100, 600, false).filter(([type]) => type === 'FaultConfirmed')).toEqual([['FaultConfirmed', 410]]);
  });

  it('bounds only what machines report, and a late report other than a sample keeps its own time', () => {
    const now = at(100);
    expect(reportTime(sample(100, 240), now)).toBe(now);
    expect(reportTime(sample(100, -240), now)).toBe(now - REPORT_LAG_MS);
    const phase = msg(40, 'RolePhaseChanged', { machineId: 'trainer-0', role: 'trainer', phase: 'training', step: 1, changedAt: iso(40) });
    expect(reportTime(phase, now)).toBe(at(40));
    expect(reportTime(msg(400, 'JobStarted', { mode: 'sync', resumedFromStep: 3, trainerMachines: 1, rolloutMachines: 1 }), now)).toBe(at(400));
  });
});
