import { createHmac, timingSafeEqual } from 'node:crypto';
import { machineKeyOf } from './identity-keys';

/** One assignment and the digest of the publication the weight registry accepted for its shard. */
export interface VouchedPull {
  pullId: string;
  version: number;
  shard?: number;
  bucketIndex: number;
  pullerId: string;
  /** contracts' publicationDigest of the accepted publication. */
  publication: string;
}

/**
 * The registry vouches to a puller for which publication of a shard counts.
 *
 * Manifests reach every agent on the weights topic, which every agent may write: an agent cannot tell a
 * trainer's manifest from one a compromised machine published under the same version number (it holds
 * no key to check another machine's signature). The registry can: it makes a version live only from one
 * of the job's trainers (publication-authority.ts). So each assignment names the digest of the accepted
 * publication, with a tag only the registry and the puller can make — HMAC under a key derived from the
 * puller's machine key (which the control plane derives from the identity secret). The puller checks
 * the tag, then lays its copy out from the manifest with that digest and verifies the bytes against its
 * checksums; another agent can neither forge the tag nor make a rogue manifest count.
 */
export class PublicationVoucher {
  private readonly keys = new Map<string, Buffer>();
  constructor(private readonly secret: string) {}

  vouch(pull: VouchedPull): string {
    let key = this.keys.get(pull.pullerId);
    if (!key) {
      // Bounded by the machines of the deployment; a runaway set of ids only costs recomputing.
      if (this.keys.size >= MAX_CACHED_KEYS) this.keys.clear();
      this.keys.set(pull.pullerId, (key = vouchingKeyOf(machineKeyOf(this.secret, pull.pullerId))));
    }
    return tagOf(key, pull);
  }
}

/** A puller's side: whether a tag is the registry's for this assignment and publication (constant time). */
export class VoucherCheck {
  private readonly key: Buffer;
  constructor(machineKey: Buffer) {
    this.key = vouchingKeyOf(machineKey);
  }

  holds(pull: VouchedPull, tag: string): boolean {
    const expected = Buffer.from(tagOf(this.key, pull), 'base64url');
    const presented = Buffer.from(tag, 'base64url');
    return presented.length === expected.length && timingSafeEqual(presented, expected);
  }
}

const MAX_CACHED_KEYS = 100_000;

function vouchingKeyOf(machineKey: Buffer): Buffer {
  return createHmac('sha256', machineKey).update('robustrl/publication-voucher/v1', 'utf8').digest();
}

function tagOf(key: Buffer, p: VouchedPull): string {
  const bound = JSON.stringify([p.pullId, p.version, p.shard ?? 0, p.bucketIndex, p.pullerId, p.publication]);
  return createHmac('sha256', key).update(bound, 'utf8').digest('base64url');
}
