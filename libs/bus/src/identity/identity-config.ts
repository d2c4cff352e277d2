import { CONTROL_PLANE_PUBLIC_KEY, CONTROLLER_COMMAND_SECRET, CONTROLLER_PUBLIC_KEY, IDENTITY_SECRET, MACHINE_KEY, ROLE_CERTIFICATE } from '../bus-settings';
import type { BusIdentity } from '../message-bus';
import { machineKeyFromText, MIN_SECRET_LENGTH, publicKeyFromText, publicKeyText, publisherKeyPairOf } from './identity-keys';
import { certifiedPublisherKey, ROLES_NEEDING_CERTIFICATE } from './role-certificates';
import { MachineSigner, ServiceSigner } from './signers';
import { AgentCommandVerifier, ControlPlaneVerifier } from './verifiers';

/** Who a process is on the bus: a control-plane service by name, or the agent of one machine. */
export type BusSpeaker = { service: string } | { machineId: string };

/**
 * The bus identity of a process from its settings (bus-settings.ts; each also as `<NAME>_FILE`, a mounted
 * secret, not both):
 *
 *  - a control-plane service: `ROBUSTRL_IDENTITY_SECRET` (at least 32 characters) — it signs as itself
 *    and accepts only records signed by whom they speak for; the controller also
 *    `ROBUSTRL_CONTROLLER_COMMAND_SECRET` where the deployment separates the command key (then only the
 *    process holding it issues commands agents execute);
 *  - an agent: `ROBUSTRL_MACHINE_KEY` (its own key, `robustrl identity machine-key <machine>`) and
 *    `ROBUSTRL_CONTROLLER_PUBLIC_KEY` (`robustrl identity controller-public-key`), both or neither — it
 *    signs as its machine and executes only the controller's commands; and
 *    `ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY` (`robustrl identity control-plane-public-key`): with it, it acts
 *    on a retirement, a release or a probe only when the control plane signed it (without it, on any —
 *    a deployment from before the key; the agent says so when it starts). An agent given the secret
 *    itself is refused: with it, it could speak for every machine.
 *
 * No setting: undefined, an unsigned deployment (the embedded main, a developer's machine).
 */
export function busIdentityFromEnv(env: NodeJS.ProcessEnv, speaker: BusSpeaker): BusIdentity | undefined {
  const secret = IDENTITY_SECRET.read(env);
  if ('service' in speaker) {
    if (secret === undefined) return undefined;
    if (secret.length < MIN_SECRET_LENGTH) throw new Error(`ROBUSTRL_IDENTITY_SECRET must have at least ${MIN_SECRET_LENGTH} characters`);
    const commandSecret = CONTROLLER_COMMAND_SECRET.read(env);
    if (commandSecret !== undefined && commandSecret.length < MIN_SECRET_LENGTH)
      throw new Error(`ROBUSTRL_CONTROLLER_COMMAND_SECRET must have at least ${MIN_SECRET_LENGTH} characters`);
    return { signer: new ServiceSigner(speaker.service, secret, commandSecret), verifier: new ControlPlaneVerifier(secret) };
  }
  if (CONTROLLER_COMMAND_SECRET.read(env) !== undefined)
    throw new Error(
      "ROBUSTRL_CONTROLLER_COMMAND_SECRET is the controller's: an agent holding it could issue commands. Give the agent ROBUSTRL_CONTROLLER_PUBLIC_KEY " +
        '(robustrl identity controller-public-key) instead',
    );
  if (secret !== undefined)
    throw new Error(
      "ROBUSTRL_IDENTITY_SECRET is the control plane's: an agent holding it could speak for every machine. Give the agent ROBUSTRL_MACHINE_KEY " +
        '(robustrl identity machine-key <machine>) and ROBUSTRL_CONTROLLER_PUBLIC_KEY instead',
    );
  const machineKey = MACHINE_KEY.read(env);
  const controllerKey = CONTROLLER_PUBLIC_KEY.read(env);
  if (machineKey === undefined && controllerKey === undefined) return undefined;
  if (machineKey === undefined || controllerKey === undefined)
    throw new Error(
      'ROBUSTRL_MACHINE_KEY and ROBUSTRL_CONTROLLER_PUBLIC_KEY go together: the agent signs with the one and checks the commands it executes with the other',
    );
  const controlPlaneKey = CONTROL_PLANE_PUBLIC_KEY.read(env);
  return {
    signer: new MachineSigner(
      speaker.machineId,
      parsed('ROBUSTRL_MACHINE_KEY', () => machineKeyFromText(machineKey)),
    ),
    verifier: new AgentCommandVerifier(
      parsed('ROBUSTRL_CONTROLLER_PUBLIC_KEY', () => publicKeyFromText(controllerKey)),
      controlPlaneKey === undefined ? undefined : parsed('ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY', () => publicKeyFromText(controlPlaneKey)),
    ),
  };
}

/**
 * The control plane's identity secret (`ROBUSTRL_IDENTITY_SECRET` or `_FILE`), for what a service derives
 * from it beyond the bus (the weight registry's pull grants); undefined in an unsigned deployment.
 */
export function identitySecretFromEnv(env: NodeJS.ProcessEnv): string | undefined {
  const secret = IDENTITY_SECRET.read(env);
  if (secret !== undefined && secret.length < MIN_SECRET_LENGTH) throw new Error(`ROBUSTRL_IDENTITY_SECRET must have at least ${MIN_SECRET_LENGTH} characters`);
  return secret;
}

/** An agent's own key (`ROBUSTRL_MACHINE_KEY` or `_FILE`), for what it opens beyond the bus (pull grants); undefined when unset. */
export function machineKeyFromEnv(env: NodeJS.ProcessEnv): Buffer | undefined {
  const key = MACHINE_KEY.read(env);
  return key === undefined ? undefined : parsed('ROBUSTRL_MACHINE_KEY', () => machineKeyFromText(key));
}

/**
 * An agent's role certificate (`ROBUSTRL_ROLE_CERTIFICATE` or `_FILE`; role-certificates.ts), which its
 * registration and manifests show. With a machine key, a training role without one is refused here, at
 * start, rather than every registration being dead-lettered, and so is another machine's; with the
 * control plane's public key, one that does not hold for this machine and role is too.
 */
export function roleCertificateFromEnv(env: NodeJS.ProcessEnv, machineId: string, role: string): string | undefined {
  const certificate = ROLE_CERTIFICATE.read(env);
  const signed = MACHINE_KEY.read(env) !== undefined;
  if (certificate === undefined) {
    if (signed && ROLES_NEEDING_CERTIFICATE.has(role))
      throw new Error(
        `ROBUSTRL_ROLE_CERTIFICATE: a ${role} machine shows the operator's certificate for its role (robustrl identity role-certificate ${machineId} ${role}); ` +
          'the control plane refuses its registration without one',
      );
    return undefined;
  }
  const wrong = () =>
    new Error(`ROBUSTRL_ROLE_CERTIFICATE does not hold for machine ${machineId} as ${role} (robustrl identity role-certificate ${machineId} ${role})`);
  // Its first half is this machine's publisher key (role-certificates.ts): another machine's certificate is caught without any key.
  const machineKey = machineKeyFromEnv(env);
  if (machineKey && Buffer.from(certificate, 'base64url').subarray(0, 32).toString('base64url') !== publicKeyText(publisherKeyPairOf(machineKey).publicKey))
    throw wrong();
  const publicKey = CONTROL_PLANE_PUBLIC_KEY.read(env);
  if (
    publicKey !== undefined &&
    !certifiedPublisherKey(
      parsed('ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY', () => publicKeyFromText(publicKey)),
      machineId,
      role,
      certificate,
    )
  )
    throw wrong();
  return certificate;
}

function parsed<T>(name: string, parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    throw new Error(`${name}: ${(err as Error).message}`);
  }
}
