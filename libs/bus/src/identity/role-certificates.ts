import { createPublicKey, sign as ed25519Sign, verify as ed25519Verify, KeyObject } from 'node:crypto';
import type { Draft, RobustrlMessage } from '@robustrl/contracts';
import { controlPlaneRecordKeyPairOf, machineKeyOf, publicKeyText, publisherKeyPairOf } from './identity-keys';
import { IdentityHeaders, SignedRecord, signedBytes } from './record-identity';

/**
 * Which machines may train (docs/operators/security.md "Who can do what"): a machine's key proves which machine speaks, not
 * which role it was given. A role that publishes weights and hosts the trainer group's rendezvous is
 * therefore claimed only with a role certificate, issued by the operator with the machine's key
 * (`robustrl identity role-certificate <machine> trainer`) or attached by the controller to the
 * PromoteRolloutToTrainer that lends a rollout as warm standby (paper §5.1.3).
 *
 * A certificate is the machine's publisher public key (identity-keys.ts) and an Ed25519 signature under
 * the control plane's record key over (machine, role, that key), base64url. The control plane and every
 * agent holding the control plane's public key check it, so one compromised rollout machine cannot
 * register as a trainer (and publish the job's weights) nor as rank 0 (and host the rendezvous). And a
 * trainer's manifests carry its certificate and a signature under its publisher key: an agent keeps a
 * manifest only from a machine certified to train, so no other machine can crowd out (or stand in for)
 * the trainer's manifest of a version.
 *
 * A certificate names no job or recovery: a machine once lent as a standby keeps one it could show
 * again later. It is still the operator's (or the controller's) word that the machine may train.
 */
export const ROLES_NEEDING_CERTIFICATE: ReadonlySet<string> = new Set(['trainer', 'hybrid']);

/** Ed25519 is deterministic: the same (machine, role) gets the same certificate, so a decision made twice stays one message. */
export function roleCertificateOf(secret: string, machineId: string, role: string): string {
  const publisher = rawPublicKey(publisherKeyPairOf(machineKeyOf(secret, machineId)).publicKey);
  const signature = ed25519Sign(null, certifiedBytes(machineId, role, publisher), controlPlaneRecordKeyPairOf(secret).privateKey);
  return Buffer.concat([publisher, signature]).toString('base64url');
}

/** The publisher key `certificate` vouches for as `machineId`'s in `role`, or null when it does not hold. */
export function certifiedPublisherKey(controlPlanePublicKey: KeyObject, machineId: string, role: string, certificate: string): KeyObject | null {
  const raw = Buffer.from(certificate, 'base64url');
  if (raw.length !== 96) return null;
  const publisher = raw.subarray(0, 32);
  if (!ed25519Verify(null, certifiedBytes(machineId, role, publisher), controlPlanePublicKey, raw.subarray(32))) return null;
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: publisher.toString('base64url') }, format: 'jwk' });
}

export function roleCertificateHolds(controlPlanePublicKey: KeyObject, machineId: string, role: string, certificate: string): boolean {
  return certifiedPublisherKey(controlPlanePublicKey, machineId, role, certificate) !== null;
}

/**
 * Why a machine's claim of a role in `message` does not hold, or null: a MachineRegistered as, or a
 * MachineRoleChanged to, a role of ROLES_NEEDING_CERTIFICATE must carry that machine's certificate for it.
 * Given the record (an agent's check: it cannot check another machine's HMAC, so a copied certificate
 * with another host would otherwise pass), the record must also be signed under the certified key.
 */
export function roleClaimProblem(
  message: RobustrlMessage,
  controlPlanePublicKey: KeyObject,
  record?: SignedRecord & { headers: Readonly<Record<string, string>> },
): string | null {
  const claim = roleClaimOf(message);
  if (claim === null || !ROLES_NEEDING_CERTIFICATE.has(claim.role)) return null;
  const what = `${message.type} claims the ${claim.role} role for ${claim.machineId}`;
  if (claim.certificate === undefined) return `${what} without a role certificate (robustrl identity role-certificate ${claim.machineId} ${claim.role})`;
  const key = certifiedPublisherKey(controlPlanePublicKey, claim.machineId, claim.role, claim.certificate);
  if (!key) return `${what} with a role certificate that does not hold for that machine and role`;
  if (record === undefined) return null;
  const signature = record.headers[IdentityHeaders.publisherSignature];
  return signature && ed25519Verify(null, Buffer.concat(signedBytes(record)), key, Buffer.from(signature, 'base64url'))
    ? null
    : `${what} but is not signed under its certified publisher key: not that machine's`;
}

/**
 * Why an agent does not keep a weight manifest (WeightVersionPublished), or null: its sources are one
 * machine, its `publisherCertificate` certifies that machine to train, and the record carries a
 * signature under the certified publisher key (`robustrl-publisher-signature`, MachineSigner).
 */
export function manifestPublisherProblem(
  record: SignedRecord & { headers: Readonly<Record<string, string>> },
  message: RobustrlMessage,
  controlPlanePublicKey: KeyObject,
): string | null {
  const d = message.data as { version?: number; sources?: Array<{ instanceId: string }>; publisherCertificate?: string };
  const what = `the manifest of version ${d.version}`;
  const machines = [...new Set((d.sources ?? []).map((s) => s.instanceId.split('/')[0]))];
  if (machines.length !== 1) return `${what} names ${machines.length} source machines, not one: ignored`;
  const [machineId] = machines;
  if (d.publisherCertificate === undefined) return `${what} from ${machineId} carries no role certificate: not from a trainer, ignored`;
  const key = trainerPublisherKey(controlPlanePublicKey, machineId, d.publisherCertificate);
  if (!key) return `${what} from ${machineId} carries a role certificate that does not hold for it: ignored`;
  const signature = record.headers[IdentityHeaders.publisherSignature];
  if (!signature) return `${what} from ${machineId} carries no publisher signature: ignored`;
  return ed25519Verify(null, Buffer.concat(signedBytes(record)), key, Buffer.from(signature, 'base64url'))
    ? null
    : `${what} from ${machineId} carries a publisher signature that does not hold under its certified key: ignored`;
}

/** A trainer's few certificates are checked once each, not per manifest (importing the key dominates the check). */
const CERTIFIED_KEYS_KEPT = 1024;
const certifiedKeys = new Map<string, { controlPlaneKey: KeyObject; key: KeyObject | null }>();

/** The publisher key `certificate` vouches for as `machineId`'s in a training role, or null. */
function trainerPublisherKey(controlPlanePublicKey: KeyObject, machineId: string, certificate: string): KeyObject | null {
  const id = `${machineId}\u0000${certificate}`;
  const kept = certifiedKeys.get(id);
  if (kept && kept.controlPlaneKey === controlPlanePublicKey) return kept.key;
  let key: KeyObject | null = null;
  for (const role of ROLES_NEEDING_CERTIFICATE) key ??= certifiedPublisherKey(controlPlanePublicKey, machineId, role, certificate);
  if (certifiedKeys.size >= CERTIFIED_KEYS_KEPT) certifiedKeys.clear();
  certifiedKeys.set(id, { controlPlaneKey: controlPlanePublicKey, key });
  return key;
}

/**
 * The controller's shell completes each PromoteRolloutToTrainer with the lent machine's trainer
 * certificate, which the agent shows again in its MachineRoleChanged (a DecidingConsumer `completeDraft`).
 */
export function certifyPromotions(secret: string): (draft: Draft) => Draft {
  return (draft) => {
    if (draft.type !== 'PromoteRolloutToTrainer') return draft;
    const data = draft.data as { rolloutMachineId: string };
    return { ...draft, data: { ...draft.data, roleCertificate: roleCertificateOf(secret, data.rolloutMachineId, 'trainer') } } as Draft;
  };
}

function roleClaimOf(message: RobustrlMessage): { machineId: string; role: string; certificate?: string } | null {
  const d = message.data as { machineId?: string; role?: string; to?: string; roleCertificate?: string };
  if (message.type === 'MachineRegistered') return { machineId: d.machineId!, role: d.role!, certificate: d.roleCertificate };
  if (message.type === 'MachineRoleChanged') return { machineId: d.machineId!, role: d.to!, certificate: d.roleCertificate };
  return null;
}

function certifiedBytes(machineId: string, role: string, publisher: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`robustrl/role-certificate/v1\u0000${machineId}\u0000${role}\u0000`, 'utf8'), publisher]);
}

function rawPublicKey(key: KeyObject): Buffer {
  return Buffer.from(publicKeyText(key), 'base64url');
}
