import { createCipheriv, createDecipheriv, createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { controlPlaneKeyOf, machineKeyOf } from './identity-keys';

/**
 * What a grant is for: one puller reading one version from one source — what a weight server's catalog
 * grants a connection (weight-server.ts), so every bucket pull of that version between the two carries
 * the same grant, sealed once.
 */
export interface PullBinding {
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
 *  - the registry (control plane: it can derive every machine key) makes a token per (version, puller,
 *    source), HMAC(control-plane key, binding) — derived, so deciding again seals the same grant;
 *  - it seals the token (AES-256-GCM) once under the puller's machine key and once under the source's,
 *    the binding as additional data;
 *  - the puller opens its copy and presents the token; the source opens its own and compares.
 *
 * Another agent can open neither copy, so it can neither present the token nor forge an assignment the
 * source can open (GCM authenticates the sealed copy to whoever holds the source's key).
 */
export class PullGrantSealer {
  private readonly controlPlaneKey: Buffer;
  /** Each machine's sealing key, derived once (two HMACs). */
  private readonly sealingKeys = new Map<string, Buffer>();
  /** Grants sealed, by binding: a version's buckets from one source to one puller share theirs (sealing costs ~40 µs). */
  private readonly sealed = new Map<string, SealedPullGrant>();

  constructor(private readonly secret: string) {
    this.controlPlaneKey = controlPlaneKeyOf(secret);
  }

  seal(pull: PullBinding): SealedPullGrant {
    const binding = aad(pull);
    let grant = this.sealed.get(binding);
    if (!grant) {
      const token = createHmac('sha256', this.controlPlaneKey).update(`robustrl/pull-grant/v1\u0000${binding}`, 'utf8').digest();
      grant = {
        forPuller: seal(this.sealingKeyOf(pull.pullerId), 'puller', pull, token),
        forSource: seal(this.sealingKeyOf(pull.sourceId), 'source', pull, token),
      };
      if (this.sealed.size >= MAX_CACHED_GRANTS) this.sealed.clear();
      this.sealed.set(binding, grant);
    }
    return grant;
  }

  private sealingKeyOf(machineId: string): Buffer {
    let key = this.sealingKeys.get(machineId);
    if (!key) {
      // Bounded by the machines of the deployment; a runaway set of ids only costs recomputing.
      if (this.sealingKeys.size >= MAX_CACHED_KEYS) this.sealingKeys.clear();
      this.sealingKeys.set(machineId, (key = sealingKeyOf(machineKeyOf(this.secret, machineId))));
    }
    return key;
  }
}

/** One grant sealed with the deployment's secret (a PullGrantSealer keeps the derived keys for many). */
export function sealPullGrant(secret: string, pull: PullBinding): SealedPullGrant {
  return new PullGrantSealer(secret).seal(pull);
}

/** The token sealed for `as` under this machine's key, or null when it does not open (not sealed for this machine, or altered). */
export function openPullGrant(machineKey: Buffer, as: 'puller' | 'source', pull: PullBinding, sealed: string): Buffer | null {
  return new PullGrantOpener(machineKey).open(as, pull, sealed);
}

/** An agent's side: opens what was sealed for its machine (its sealing key derived once, what it opened kept). */
export class PullGrantOpener {
  private readonly key: Buffer;
  private readonly opened = new Map<string, Buffer>();
  constructor(machineKey: Buffer) {
    this.key = sealingKeyOf(machineKey);
  }

  open(as: 'puller' | 'source', pull: PullBinding, sealed: string): Buffer | null {
    const id = `${as}\u0000${aad(pull)}\u0000${sealed}`;
    const known = this.opened.get(id);
    if (known) return known;
    const token = this.decrypt(as, pull, sealed);
    if (token) {
      if (this.opened.size >= MAX_CACHED_GRANTS) this.opened.clear();
      this.opened.set(id, token);
    }
    return token;
  }

  private decrypt(as: 'puller' | 'source', pull: PullBinding, sealed: string): Buffer | null {
    const bytes = Buffer.from(sealed, 'base64url');
    if (bytes.length !== TOKEN_BYTES + TAG_BYTES) return null;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, nonceOf(as, pull));
      decipher.setAAD(Buffer.from(aad(pull), 'utf8'));
      decipher.setAuthTag(bytes.subarray(TOKEN_BYTES));
      return Buffer.concat([decipher.update(bytes.subarray(0, TOKEN_BYTES)), decipher.final()]);
    } catch {
      return null;
    }
  }
}

/** Whether a presented token (base64url) is the expected one; constant time. */
export function sameToken(expected: Buffer, presented: string): boolean {
  const bytes = Buffer.from(presented, 'base64url');
  return bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

const TOKEN_BYTES = 32;
const MAX_CACHED_KEYS = 100_000;
const MAX_CACHED_GRANTS = 100_000;
const TAG_BYTES = 16;

function seal(key: Buffer, as: 'puller' | 'source', pull: PullBinding, token: Buffer): string {
  const cipher = createCipheriv('aes-256-gcm', key, nonceOf(as, pull));
  cipher.setAAD(Buffer.from(aad(pull), 'utf8'));
  return Buffer.concat([cipher.update(token), cipher.final(), cipher.getAuthTag()]).toString('base64url');
}

function sealingKeyOf(machineKey: Buffer): Buffer {
  return createHmac('sha256', machineKey).update('robustrl/pull-grant-seal/v1', 'utf8').digest();
}

/** One nonce per (key, binding, side): each key seals one token per binding, always the same one. */
function nonceOf(as: 'puller' | 'source', pull: PullBinding): Buffer {
  return createHash('sha256')
    .update(`${as}\u0000${aad(pull)}`, 'utf8')
    .digest()
    .subarray(0, 12);
}

function aad(pull: PullBinding): string {
  return JSON.stringify([pull.version, pull.pullerId, pull.sourceId]);
}
