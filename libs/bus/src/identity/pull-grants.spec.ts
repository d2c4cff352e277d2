import { machineKeyOf } from './identity-keys';
import { openPullGrant, PullGrantOpener, PullGrantSealer, sameToken, sealPullGrant } from './pull-grants';

describe('pull grants: a token per (version, puller, source), sealed for the puller and the source', () => {
  const SECRET = 'pull-grant-spec-identity-secret-0123456789';
  const pull = { version: 3, pullerId: 'rollout-2', sourceId: 'rollout-5' };
  const grant = sealPullGrant(SECRET, pull);

  it('the puller and the source each open the same token; deciding again seals the same grant', () => {
    const puller = openPullGrant(machineKeyOf(SECRET, 'rollout-2'), 'puller', pull, grant.forPuller);
    const source = openPullGrant(machineKeyOf(SECRET, 'rollout-5'), 'source', pull, grant.forSource);
    expect(puller).toHaveLength(32);
    expect(puller!.equals(source!)).toBe(true);
    expect(sameToken(source!, puller!.toString('base64url'))).toBe(true);
    expect(sealPullGrant(SECRET, pull)).toEqual(grant);
  });

  it('a sealer keeps what it sealed, an opener what it opened: the same answers', () => {
    const sealer = new PullGrantSealer(SECRET);
    expect(sealer.seal(pull)).toEqual(grant);
    expect(sealer.seal({ ...pull })).toBe(sealer.seal(pull));
    const opener = new PullGrantOpener(machineKeyOf(SECRET, 'rollout-2'));
    expect(opener.open('puller', pull, grant.forPuller)!.equals(openPullGrant(machineKeyOf(SECRET, 'rollout-2'), 'puller', pull, grant.forPuller)!)).toBe(true);
    expect(opener.open('puller', pull, grant.forPuller)).not.toBeNull();
    expect(opener.open('puller', { ...pull, version: 9 }, grant.forPuller)).toBeNull();
  });

  it('opens for no one else, for no other version or source, and not once altered; another deployment cannot seal one', () => {
    expect(openPullGrant(machineKeyOf(SECRET, 'rollout-9'), 'puller', pull, grant.forPuller)).toBeNull();
    expect(openPullGrant(machineKeyOf(SECRET, 'rollout-2'), 'source', pull, grant.forPuller)).toBeNull();
    expect(openPullGrant(machineKeyOf(SECRET, 'rollout-2'), 'puller', { ...pull, version: 4 }, grant.forPuller)).toBeNull();
    expect(openPullGrant(machineKeyOf(SECRET, 'rollout-2'), 'puller', { ...pull, sourceId: 'trainer-0' }, grant.forPuller)).toBeNull();
    const bytes = Buffer.from(grant.forPuller, 'base64url');
    bytes[3] ^= 1;
    expect(openPullGrant(machineKeyOf(SECRET, 'rollout-2'), 'puller', pull, bytes.toString('base64url'))).toBeNull();
    expect(openPullGrant(machineKeyOf(SECRET, 'rollout-2'), 'puller', pull, 'short')).toBeNull();
    const forged = sealPullGrant('another-deployments-secret-0123456789abcdef', pull);
    expect(openPullGrant(machineKeyOf(SECRET, 'rollout-5'), 'source', pull, forged.forSource)).toBeNull();
    expect(sameToken(Buffer.alloc(32), Buffer.alloc(31).toString('base64url'))).toBe(false);
  });
});
