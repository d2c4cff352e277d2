import { createHmac, createPrivateKey, createPublicKey, KeyObject } from 'node:crypto';

/**
 * The keys of a deployment, all derived from one identity secret that only the control plane holds:
 *
 *  - a machine's key, HMAC(secret, machine id): given to that machine's agent alone, so an agent can
 *    sign as its own machine and as no other, while every control-plane service can check any machine
 *    without a key registry (the key is recomputed from the claimed id);
 *  - the control plane's key, for what the services publish (HMAC: cheap at telemetry rates);
 *  - the controller's command key pair (Ed25519): agents hold only its public half, so they can check
 *    that a command came from the controller but cannot issue one;
 *  - the control plane's record key pair (Ed25519): what the services publish for agents to act on
 *    beyond commands (a version retired, the trainer released, a probe) is signed with it too, and
 *    agents check it with the public half;
 *  - a machine's publisher key pair (Ed25519), seeded from its machine key: a trainer signs the weight
 *    manifests it publishes with it, and its role certificate vouches for the public half, so other
 *    agents can check a manifest came from a trainer (role-certificates.ts).
 *
 * Whoever holds the secret can sign as anyone: it stays with the control-plane services (and the
 * operator who provisions machine keys with `robustrl identity machine-key`).
 */
export const MIN_SECRET_LENGTH = 32;

export function machineKeyOf(secret: string, machineId: string): Buffer {
  return derive(secret, `robustrl/machine-key/v1\u0000${machineId}`);
}

export function controlPlaneKeyOf(secret: string): Buffer {
  return derive(secret, 'robustrl/control-plane-key/v1');
}

/** The controller's Ed25519 key pair, seeded from the secret (so nothing else needs storing). */
export function controllerKeyPairOf(secret: string): { privateKey: KeyObject; publicKey: KeyObject } {
  const seed = derive(secret, 'robustrl/controller-command-key/v1');
  // PKCS#8 wrapping of a raw Ed25519 seed (RFC 8410): a fixed 16-byte prefix, then the 32 bytes.
  const privateKey = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  return { privateKey, publicKey: createPublicKey(privateKey) };
}

/** The control plane's record key pair (Ed25519), seeded from the secret: every service holds the private half. */
export function controlPlaneRecordKeyPairOf(secret: string): { privateKey: KeyObject; publicKey: KeyObject } {
  const seed = derive(secret, 'robustrl/control-plane-record-key/v1');
  const privateKey = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  return { privateKey, publicKey: createPublicKey(privateKey) };
}

/** A machine's publisher key pair (Ed25519), seeded from its machine key: the machine and the control plane can both derive it. */
export function publisherKeyPairOf(machineKey: Buffer): { privateKey: KeyObject; publicKey: KeyObject } {
  const seed = createHmac('sha256', machineKey).update('robustrl/publisher-key/v1', 'utf8').digest();
  const privateKey = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  return { privateKey, publicKey: createPublicKey(privateKey) };
}

/** A public key as operators copy it: the raw 32 bytes, base64url. */
export function publicKeyText(key: KeyObject): string {
  const jwk = key.export({ format: 'jwk' });
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || !jwk.x) throw new Error('not an Ed25519 public key');
  return jwk.x;
}

export function publicKeyFromText(text: string): KeyObject {
  const raw = Buffer.from(text.trim(), 'base64url');
  if (raw.length !== 32) throw new Error('an Ed25519 public key is 32 bytes, base64url (what `robustrl identity controller-public-key` prints)');
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
}

/** A machine key as operators copy it: base64url. */
export function machineKeyText(key: Buffer): string {
  return key.toString('base64url');
}

export function machineKeyFromText(text: string): Buffer {
  const raw = Buffer.from(text.trim(), 'base64url');
  if (raw.length !== 32) throw new Error('a machine key is 32 bytes, base64url (what `robustrl identity machine-key <machine>` prints)');
  return raw;
}

const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

function derive(secret: string, label: string): Buffer {
  return createHmac('sha256', secret).update(label, 'utf8').digest();
}
