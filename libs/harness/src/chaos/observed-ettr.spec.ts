import { observedEttr, ObservedSample } from './observed-ettr';

const shape = { trainers: 2, rollouts: 2 };
const s = (second: number, trainersUp: number, enginesUp: number, samplesFlowing = true): ObservedSample => ({
  at: second * 1000,
  trainersUp,
  enginesUp,
  samplesFlowing,
});

describe('the ETTR observed from the processes', () => {
  it('counts every GPU effective while the group is whole and the engines serve', () => {
    expect(observedEttr([s(0, 2, 2), s(10, 2, 2)], shape)).toEqual({ ettr: 1, gpuSeconds: 40, effectiveGpuSeconds: 40 });
  });

  it('charges a dead engine its GPU, and the trainers too once no engine serves', () => {
    // 10 s one engine down; 10 s both down: the trainers wait on a dead role.
    const r = observedEttr([s(0, 2, 1), s(10, 2, 0), s(20, 2, 2)], shape);
    expect(r.effectiveGpuSeconds).toBe(30);
    expect(r.ettr).toBeCloseTo(30 / 80);
  });

  it('charges every GPU while a rank is down and no sample flows: a stand-in cannot look busy', () => {
    const r = observedEttr([s(0, 1, 2, false), s(10, 2, 2)], shape);
    expect(r.ettr).toBe(0);
    // The engines still generate ahead of the trainer (samples flowing): they count, the trainers do not.
    expect(observedEttr([s(0, 1, 2, true), s(10, 2, 2)], shape).ettr).toBeCloseTo(0.5);
  });

  it('while a rank is down, an engine counts only if it generates itself: an idle one waits on the dead trainer', () => {
    // Two engines up, samples completing, but only one of them generating: one GPU effective.
    const one = { ...s(0, 1, 2, true), enginesGenerating: 1 };
    expect(observedEttr([one, s(10, 2, 2)], shape).ettr).toBeCloseTo(0.25);
    // With the group whole every serving engine counts, generating or not.
    expect(observedEttr([{ ...s(0, 2, 2), enginesGenerating: 0 }, s(10, 2, 2)], shape).ettr).toBe(1);
  });

  it('is 1 before anything was observed', () => {
    expect(observedEttr([], shape).ettr).toBe(1);
  });
});
