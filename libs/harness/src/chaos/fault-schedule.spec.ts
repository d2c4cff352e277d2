import { DEFAULT_FAULT_WEIGHTS, FAULT_KINDS, faultSchedule, parseFaultMix, pickOf } from './fault-schedule';

describe('the chaos fault schedule', () => {
  it('is the same for the same seed and differs for another', () => {
    expect(faultSchedule({ seed: 7, faults: 20 })).toEqual(faultSchedule({ seed: 7, faults: 20 }));
    expect(faultSchedule({ seed: 8, faults: 20 })).not.toEqual(faultSchedule({ seed: 7, faults: 20 }));
  });

  it('covers every kind of the mix once there are enough faults, and keeps gaps and outages in their ranges', () => {
    for (const seed of [1, 2, 3, 99]) {
      const schedule = faultSchedule({ seed, faults: 20, gapSeconds: { min: 2, max: 5 }, downSeconds: { min: 1, max: 3 } });
      expect(schedule).toHaveLength(20);
      expect(new Set(schedule.map((f) => f.kind))).toEqual(new Set(FAULT_KINDS.filter((k) => DEFAULT_FAULT_WEIGHTS[k] > 0)));
      for (const f of schedule) {
        expect(f.afterSeconds).toBeGreaterThanOrEqual(2);
        expect(f.afterSeconds).toBeLessThanOrEqual(5);
        expect(f.downSeconds).toBeGreaterThanOrEqual(1);
        expect(f.downSeconds).toBeLessThanOrEqual(3);
        expect(f.pick).toBeGreaterThanOrEqual(0);
        expect(f.pick).toBeLessThan(1);
      }
    }
  });

  it('a mix leaves out what weighs 0 and draws what weighs more more often', () => {
    const schedule = faultSchedule({ seed: 5, faults: 400, weights: { ...parseFaultMix('restart-broker=0,restart-postgres=0,kill-service=20') } });
    const count = (k: string) => schedule.filter((f) => f.kind === k).length;
    expect(count('restart-broker') + count('restart-postgres')).toBe(0);
    expect(count('kill-service')).toBeGreaterThan(count('kill-trainer-process') * 3);
  });

  it('refuses a mix it cannot run, naming why', () => {
    expect(() => parseFaultMix('kill-everything=1')).toThrow(/unknown fault kind 'kill-everything'/);
    expect(() => parseFaultMix('restart-broker=-1')).toThrow(/must be a number ≥ 0/);
    const none = Object.fromEntries(Object.keys(DEFAULT_FAULT_WEIGHTS).map((k) => [k, 0]));
    expect(() => faultSchedule({ seed: 1, faults: 3, weights: none })).toThrow(/no kind with a positive weight/);
  });

  it('draws overlaps on purpose, seeded, from a stream of their own: the kinds, gaps and picks stay those of the seed', () => {
    const none = faultSchedule({ seed: 4, faults: 60, overlap: 0 });
    const some = faultSchedule({ seed: 4, faults: 60 });
    expect(none.every((f) => !f.overlaps)).toBe(true);
    expect(some.map(({ overlaps: _, ...f }) => f)).toEqual(none.map(({ overlaps: _, ...f }) => f));
    const share = some.filter((f) => f.overlaps).length / some.length;
    expect(share).toBeGreaterThan(0.1);
    expect(share).toBeLessThan(0.45);
    expect(some[0].overlaps).toBe(false);
    // Every fault overlaps but those made to show an escalation rule, which need the step to themselves.
    const all = faultSchedule({ seed: 4, faults: 60, overlap: 1 }).slice(1);
    const escalating = (k: string) => k === 'second-trainer-fault-in-step' || k === 'machines-lost-during-recovery';
    expect(all.filter((f) => escalating(f.kind)).length).toBeGreaterThan(0);
    expect(all.every((f) => f.overlaps === !escalating(f.kind))).toBe(true);
    expect(() => faultSchedule({ seed: 4, faults: 3, overlap: 2 })).toThrow(/overlap must be between 0 and 1/);
  });

  it('picks a target among those present', () => {
    expect(pickOf(['a', 'b', 'c'], 0)).toBe('a');
    expect(pickOf(['a', 'b', 'c'], 0.999)).toBe('c');
    expect(pickOf([], 0.5)).toBeUndefined();
  });
});

describe('fault kinds a job must support', () => {
  it('weigh 0 in the default mix and are drawn once a job gives them weight', () => {
    expect(faultSchedule({ seed: 3, faults: 40 }).some((f) => f.kind === 'kill-engine-during-load' || f.kind === 'kill-trainer-during-checkpoint')).toBe(false);
    const kinds = new Set(
      faultSchedule({ seed: 3, faults: 16, weights: { 'kill-engine-during-load': 2, 'kill-trainer-during-checkpoint': 2 } }).map((f) => f.kind),
    );
    expect(kinds.has('kill-engine-during-load') && kinds.has('kill-trainer-during-checkpoint')).toBe(true);
  });
});
