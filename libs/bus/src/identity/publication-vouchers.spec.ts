import { machineKeyOf } from './identity-keys';
import { PublicationVoucher, VoucherCheck } from './publication-vouchers';

describe('publication vouchers: the registry tells a puller which publication of a shard counts', () => {
  const SECRET = 'publication-voucher-spec-identity-secret-0123456789';
  const pull = { pullId: 'v3/s1/b2/rollout-2/1', version: 3, shard: 1, bucketIndex: 2, pullerId: 'rollout-2', publication: 'sha256:ab' };
  const tag = new PublicationVoucher(SECRET).vouch(pull);
  const puller = new VoucherCheck(machineKeyOf(SECRET, 'rollout-2'));

  it('the puller checks the tag with its own machine key; vouching again gives the same tag', () => {
    expect(puller.holds(pull, tag)).toBe(true);
    expect(new PublicationVoucher(SECRET).vouch({ ...pull })).toBe(tag);
  });

  it('holds for no other publication, bucket, shard, version, pull or puller, and not once altered', () => {
    for (const other of [{ publication: 'sha256:ac' }, { bucketIndex: 3 }, { shard: 0 }, { version: 4 }, { pullId: 'v3/s1/b2/rollout-2/2' }])
      expect(puller.holds({ ...pull, ...other }, tag)).toBe(false);
    expect(new VoucherCheck(machineKeyOf(SECRET, 'rollout-9')).holds(pull, tag)).toBe(false);
    const bytes = Buffer.from(tag, 'base64url');
    bytes[0] ^= 1;
    expect(puller.holds(pull, bytes.toString('base64url'))).toBe(false);
    expect(puller.holds(pull, 'short')).toBe(false);
  });

  it("another deployment's secret makes no tag the puller accepts", () => {
    expect(puller.holds(pull, new PublicationVoucher('another-deployments-secret-0123456789abcdef').vouch(pull))).toBe(false);
  });
});
