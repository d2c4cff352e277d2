import { createCipheriv, createDecipheriv, createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { controlPlaneKeyOf, machineKeyOf } from './identity-keys';

/** The pull a grant is for: its token is good for this pull only. */
export interface PullBinding {
  pullId: string;
  version: number;
  pullerId: string;
  sourceId: string;
}

/** A pull's token, sealed twice: for the puller (to present) and for the source (to check against). */
export interface SealedPullGrant {
  forPuller: string;
  forSource: string;
}

/**
 * Pull grants: who may have a weight server's region (its address and remote key, a capability to read
 * that machine's memory). The weights topic is readable by every agent, so naming an assigned pull in a
 * request proves nothing; and an agent cannot check the control plane's signatures, so it cannot tell
 * the registry's assignment from one another agent wrote. A grant settles both with the keys the
 * agents already hold:
 *
 *  - the registry (control plane: it can derive every machine key) makes a token per pull,
 *    HMAC(control-plane key, pull) — derived from the pull, so deciding again seals the same grant;
 *  - it seals the token (AES-256-GCM) once under the puller's machine key and once under the source's,
 *    the pull's fields as additional data;
 *  - the puller opens its copy and presents the token; the source opens its own and compares.
 *
 * Another agent can open neither copy, so it can neither present the token nor forge an assignment the
 * source can open (GCM authenticates the sealed copy to whoever holds the source's key).
 */
export function sealPullGrant(secret: string, pull: PullBinding): SealedPullGrant {
  const token = createHmac('sha256', controlPlaneKeyOf(secret))
    .update(`robustrl/pull-grant/v1\u0000${aad(pull)}`, 'utf8')
    .digest();
  return {
    forPuller: seal(sealingKeyOf(machineKeyOf(secret, pull.pullerId)), 'puller', pull, token),
    forSource: seal(sealingKeyOf(machineKeyOf(secret, pull.sourceId)), 'source', pull, token),
  };
}

/** The token sealed for `as` under this machine's key, or null when it does not open (not sealed for this machine, or altered). */
export function openPullGrant(machineKey: Buffer, as: 'puller' | 'source', pull: PullBinding, sealed: string): Buffer | null {
  const bytes = Buffer.from(sealed, 'base64url');
  if (bytes.length !== TOKEN_BYTES + TAG_BYTES) return null;
  try {
    const decipher = createDecipheriv('aes-256-gcm', sealingKeyOf(machineKey), nonceOf(as, pull));
    decipher.setAAD(Buffer.from(aad(pull), 'utf8'));
    decipher.setAuthTag(bytes.subarray(TOKEN_BYTES));
    return Buffer.concat([decipher.update(bytes.subarray(0, TOKEN_BYTES)), decipher.final()]);
  } catch {
    return null;
  }
}

/** Whether a presented token (base64url) is the expected one; constant time. */
export function sameToken(expected: Buffer, presented: string): boolean {
  const bytes = Buffer.from(presented, 'base64url');
  return bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

const TOKEN_BYTES = 32;
const TAG_BYTES = 16;

function seal(key: Buffer, as: 'puller' | 'source', pull: PullBinding, token: Buffer): string {
  const cipher = createCipheriv('aes-256-gcm', key, nonceOf(as, pull));
  cipher.setAAD(Buffer.from(aad(pull), 'utf8'));
  return Buffer.concat([cipher.update(token), cipher.final(), cipher.getAuthTag()]).toString('base64url');
}

function sealingKeyOf(machineKey: Buffer): Buffer {
  return createHmac('sha256', machineKey).update('robustrl/pull-grant-seal/v1', 'utf8').digest();
}

/** One nonce per (key, pull, side): each key seals one token per pull, always the same one. */
function nonceOf(as: 'puller' | 'source', pull: PullBinding): Buffer {
  return createHash('sha256')
    .update(`${as}\u0000${aad(pull)}`, 'utf8')
    .digest()
    .subarray(0, 12);
}

function aad(pull: PullBinding): string {
  return JSON.stringify([pull.pullId, pull.version, pull.pullerId, pull.sourceId]);
}
