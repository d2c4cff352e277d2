import { decideContinuation, isAcceptable, oldestAcceptableVersion, policyVersionOf, staleness } from './staleness-policy';

describe('staleness policy', () => {
  it('judges a trajectory by its oldest generated turn, not its newest, and ignores tool results', () => {
    const turns = [
      { kind: 'model-output' as const, weightVersion: 3 },
      { kind: 'tool-call' as const, weightVersion: 3 },
      { kind: 'tool-result' as const, weightVersion: 1 },
      { kind: 'model-output' as const, weightVersion: 7 },
    ];
    expect(policyVersionOf(turns)).toBe(3);
    // At version 7 the newest turn is fresh, but the trajectory is 4 versions behind by its first tokens.
    expect(staleness(policyVersionOf(turns), 7)).toBe(4);
    expect(isAcceptable(3, 7, { maxStaleness: 4 })).toBe(true);
    expect(isAcceptable(3, 7, { maxStaleness: 3 })).toBe(false);
  });

  it('counts a trajectory without generated turns, or ahead of the trainer, as not stale', () => {
    expect(policyVersionOf([{ kind: 'tool-result', weightVersion: 0 }])).toBeNull();
    expect(staleness(null, 9)).toBe(0);
    expect(isAcceptable(null, 9, { maxStaleness: 0 })).toBe(true);
    expect(staleness(5, 4)).toBe(0);
  });

  it('the store filter bound agrees with isAcceptable for every version', () => {
    for (const current of [0, 1, 5]) {
      for (const max of [0, 1, 3]) {
        for (let oldest = 0; oldest <= 8; oldest++) {
          expect(oldest >= oldestAcceptableVersion(current, { maxStaleness: max })).toBe(isAcceptable(oldest, current, { maxStaleness: max }));
        }
      }
    }
  });

  describe('continuation after a weight update', () => {
    it('continues when nothing generated is older than the new weights, whatever the policy', () => {
      expect(decideContinuation(null, 4, 'restart-from-prompt')).toEqual({ action: 'continue', reason: 'prefix-current' });
      expect(decideContinuation(4, 4, 'restart-from-prompt')).toEqual({ action: 'continue', reason: 'prefix-current' });
    });

    it('restart-from-prompt drops a prefix generated with older weights', () => {
      expect(decideContinuation(3, 4, 'restart-from-prompt')).toEqual({ action: 'restart-from-prompt', reason: 'policy-restart' });
    });

    it('keep continues, unless the kept prefix alone would already exceed the bound', () => {
      expect(decideContinuation(3, 4, 'keep')).toEqual({ action: 'continue', reason: 'policy-keep' });
      expect(decideContinuation(3, 4, 'keep', { maxStaleness: 1 })).toEqual({ action: 'continue', reason: 'policy-keep' });
      expect(decideContinuation(2, 4, 'keep', { maxStaleness: 1 })).toEqual({ action: 'restart-from-prompt', reason: 'prefix-beyond-bound' });
    });
  });
});
