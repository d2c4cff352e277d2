import { sign as ed25519Sign, verify as ed25519Verify, KeyObject } from 'node:crypto';
import type { Draft, RobustrlMessage } from '@robustrl/contracts';
import { controlPlaneRecordKeyPairOf } from './identity-keys';

/**
 * Which machines may train (README "Who can do what"): a machine's key proves which machine speaks, not
 * which role it was given. A role that publishes weights and hosts the trainer group's rendezvous is
 * therefore claimed only with a role certificate — an Ed25519 signature under the control plane's record
 * key over (machine, role) — that the operator issues with the machine's key
 * (`robustrl identity role-certificate <machine> trainer`) or the controller attaches to the
 * PromoteRolloutToTrainer that lends a rollout as warm standby (paper §5.1.3). The control plane and
 * every agent holding the control plane's public key check it, so one compromised rollout machine
 * cannot register as a trainer (and publish the job's weights) nor as rank 0 (and host the rendezvous).
 *
 * A certificate names no job or recovery: a machine once lent as a standby keeps one it could show
 * again later. It is still the operator's (or the controller's) word that the machine may train.
 */
export const ROLES_NEEDING_CERTIFICATE: ReadonlySet<string> = new Set(['trainer', 'hybrid']);

/** Ed25519 is deterministic: the same (machine, role) gets the same certificate, so a decision made twice stays one message. */
export function roleCertificateOf(secret: string, machineId: string, role: string): string {
  return ed25519Sign(null, certifiedBytes(machineId, role), controlPlaneRecordKeyPairOf(secret).privateKey).toString('base64url');
}

export function roleCertificateHolds(controlPlanePublicKey: KeyObject, machineId: string, role: string, certificate: string): boolean {
  const signature = Buffer.from(certificate, 'base64url');
  return signature.length === 64 && ed25519Verify(null, certifiedBytes(machineId, role), controlPlanePublicKey, signature);
}

/**
 * Why a machine's claim of a role in `message` does not hold, or null: a MachineRegistered as, or a
 * MachineRoleChanged to, a role of ROLES_NEEDING_CERTIFICATE must carry that machine's certificate for it.
 */
export function roleClaimProblem(message: RobustrlMessage, controlPlanePublicKey: KeyObject): string | null {
  const claim = roleClaimOf(message);
  if (claim === null || !ROLES_NEEDING_CERTIFICATE.has(claim.role)) return null;
  if (claim.certificate === undefined)
    return `${message.type} claims the ${claim.role} role for ${claim.machineId} without a role certificate (robustrl identity role-certificate ${claim.machineId} ${claim.role})`;
  return roleCertificateHolds(controlPlanePublicKey, claim.machineId, claim.role, claim.certificate)
    ? null
    : `${message.type} claims the ${claim.role} role for ${claim.machineId} with a role certificate that does not hold for that machine and role`;
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

function certifiedBytes(machineId: string, role: string): Buffer {
  return Buffer.from(`robustrl/role-certificate/v1\u0000${machineId}\u0000${role}`, 'utf8');
}
