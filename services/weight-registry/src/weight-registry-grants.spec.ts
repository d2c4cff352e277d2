import { machineKeyOf, openPullGrant } from '@robustrl/bus';
import { DataOf, draft } from '@robustrl/contracts';
import { pullGrantsFromEnv } from './weight-registry.module';

describe("the registry's shell seals a grant into every assignment (identity on)", () => {
  const SECRET = 'weight-registry-spec-identity-secret-0123456789';
  const assigned = draft('WeightPullAssigned', {
    pullId: 'p-1',
    version: 2,
    bucketIndex: 0,
    pullerId: 'rollout-1',
    sourceId: 'trainer-0',
    sourceAddress: '10.0.0.1:13337',
  });

  it('none without the identity secret; with it, a grant its puller opens, the same on every decision, other outputs untouched', () => {
    expect(pullGrantsFromEnv({})).toBeUndefined();
    const complete = pullGrantsFromEnv({ ROBUSTRL_IDENTITY_SECRET: SECRET })!;
    const out = complete(assigned).data as DataOf<'WeightPullAssigned'>;
    expect(openPullGrant(machineKeyOf(SECRET, 'rollout-1'), 'puller', out, out.grant!.forPuller)).toHaveLength(32);
    expect(complete(assigned)).toEqual(complete(assigned));
    const retired = draft('WeightVersionRetired', { version: 1 });
    expect(complete(retired)).toBe(retired);
    expect(() => pullGrantsFromEnv({ ROBUSTRL_IDENTITY_SECRET: 'short' })).toThrow(/at least 32/);
  });
});
