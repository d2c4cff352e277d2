import {
  controllerKeyPairOf,
  controlPlaneRecordKeyPairOf,
  machineKeyOf,
  machineKeyText,
  MIN_SECRET_LENGTH,
  publicKeyText,
  roleCertificateOf,
} from '@robustrl/bus';
import { Role } from '@robustrl/contracts';

export type IdentityKey = 'machine-key' | 'controller-public-key' | 'control-plane-public-key' | 'role-certificate';

/** What `robustrl identity` refuses: a usage error, printed with exit code 2. */
export class IdentityUsageError extends Error {}

/**
 * The keys an operator provisions from the deployment's identity secret (`ROBUSTRL_IDENTITY_SECRET`,
 * which only the control plane holds): one machine's key for its agent, the controller's public key
 * every agent checks commands with — from the controller's own command secret
 * (`ROBUSTRL_CONTROLLER_COMMAND_SECRET`) where the deployment has one — or the control plane's public
 * key every agent checks a retirement, a release or a probe with; or one machine's certificate for the
 * role it is given (libs/bus role-certificates.ts). Printed on one line, to be put into a secret.
 */
export function identityKeyOf(what: IdentityKey, secret: string | undefined, machineId?: string, commandSecret?: string, role?: string): string {
  if (what === 'controller-public-key' && commandSecret) {
    if (commandSecret.length < MIN_SECRET_LENGTH)
      throw new IdentityUsageError(`the controller's command secret must have at least ${MIN_SECRET_LENGTH} characters`);
    return publicKeyText(controllerKeyPairOf(commandSecret).publicKey);
  }
  if (!secret) throw new IdentityUsageError("ROBUSTRL_IDENTITY_SECRET (or ROBUSTRL_IDENTITY_SECRET_FILE) must hold the deployment's identity secret");
  if (secret.length < MIN_SECRET_LENGTH) throw new IdentityUsageError(`the identity secret must have at least ${MIN_SECRET_LENGTH} characters`);
  if (what === 'controller-public-key') return publicKeyText(controllerKeyPairOf(secret).publicKey);
  if (what === 'control-plane-public-key') return publicKeyText(controlPlaneRecordKeyPairOf(secret).publicKey);
  if (!machineId) throw new IdentityUsageError(`name the machine: robustrl identity ${what} <machineId>${what === 'role-certificate' ? ' <role>' : ''}`);
  if (what === 'role-certificate') {
    const parsed = Role.safeParse(role);
    if (!parsed.success)
      throw new IdentityUsageError(`name the role, one of ${Role.options.join(', ')}: robustrl identity role-certificate ${machineId} <role>`);
    return roleCertificateOf(secret, machineId, parsed.data);
  }
  return machineKeyText(machineKeyOf(secret, machineId));
}
