import { LAST_SAFE_LEFT, MAX_RAISE_FACTOR, RAISE_BY, raisedStepTarget } from './step-target';

describe('raisedStepTarget: a job is lengthened only while faults are still to come', () => {
  const view = { committed: 0, target: 80, asked: 80, faultsLeft: 2 };

  it('stays while many steps are left', () => {
    expect(raisedStepTarget({ ...view, committed: 80 - RAISE_BY - 1 })).toBeNull();
  });

  it('raises by RAISE_BY once no more than that many are left', () => {
    expect(raisedStepTarget({ ...view, committed: 80 - RAISE_BY })).toBe(80 + RAISE_BY);
    expect(raisedStepTarget({ ...view, committed: 80 - LAST_SAFE_LEFT })).toBe(80 + RAISE_BY);
  });

  it('stays too close to the end: a process may already have read the last count', () => {
    expect(raisedStepTarget({ ...view, committed: 80 - LAST_SAFE_LEFT + 1 })).toBeNull();
    expect(raisedStepTarget({ ...view, committed: 80 })).toBeNull();
  });

  it('stays once every fault was injected', () => {
    expect(raisedStepTarget({ ...view, committed: 75, faultsLeft: 0 })).toBeNull();
  });

  it('never goes beyond MAX_RAISE_FACTOR times the steps asked for', () => {
    const cap = 80 * MAX_RAISE_FACTOR;
    expect(raisedStepTarget({ ...view, target: cap - 4, committed: cap - 8 })).toBe(cap);
    expect(raisedStepTarget({ ...view, target: cap, committed: cap - 5 })).toBeNull();
  });
});
