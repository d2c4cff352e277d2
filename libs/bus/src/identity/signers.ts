import { sign as ed25519Sign, KeyObject } from 'node:crypto';
import type { RobustrlMessage } from '@robustrl/contracts';
import { controllerKeyPairOf, controlPlaneKeyOf, controlPlaneRecordKeyPairOf, publisherKeyPairOf } from './identity-keys';
import { AGENT_ACTED_RECORDS, hmacOf, IdentityHeaders, RecordSigner, SignedRecord, signedBytes } from './record-identity';

/**
 * An agent: signs every record as its machine, with the key only it was given; and the weight manifests
 * it publishes also with its publisher key, which its role certificate vouches for (role-certificates.ts).
 */
export class MachineSigner implements RecordSigner {
  private readonly signer: string;
  private readonly publisherKey: KeyObject;
  constructor(
    machineId: string,
    private readonly key: Buffer,
  ) {
    this.signer = `machine:${machineId}`;
    this.publisherKey = publisherKeyPairOf(key).privateKey;
  }

  sign(record: SignedRecord, message?: RobustrlMessage): Record<string, string> {
    const headers: Record<string, string> = { [IdentityHeaders.signer]: this.signer, [IdentityHeaders.signature]: hmacOf(this.key, record) };
    // One per published shard of a version or per registration: an Ed25519 signature's tens of µs do not count.
    if (message && PUBLISHER_SIGNED.has(message.type))
      headers[IdentityHeaders.publisherSignature] = ed25519Sign(null, Buffer.concat(signedBytes(record)), this.publisherKey).toString('base64url');
    return headers;
  }
}

/**
 * A control-plane process (a service, or several modules in one process such as the embedded main):
 * signs with the control plane's key, naming itself, and signs commands with the controller's Ed25519
 * key too — the signature agents check before they execute anything. The command key is seeded from
 * the controller's own command secret where the deployment gives one (to the controller alone, so no
 * other service can issue a command agents execute), else from the identity secret.
 */
export class ServiceSigner implements RecordSigner {
  private readonly signer: string;
  private readonly key: Buffer;
  private readonly commandKey: KeyObject;
  private readonly recordKey: KeyObject;

  constructor(service: string, secret: string, commandSecret?: string) {
    this.signer = `service:${service}`;
    this.key = controlPlaneKeyOf(secret);
    this.commandKey = controllerKeyPairOf(commandSecret ?? secret).privateKey;
    this.recordKey = controlPlaneRecordKeyPairOf(secret).privateKey;
  }

  sign(record: SignedRecord, message: RobustrlMessage): Record<string, string> {
    const headers: Record<string, string> = { [IdentityHeaders.signer]: this.signer, [IdentityHeaders.signature]: hmacOf(this.key, record) };
    if (message.kind === 'command') {
      headers[IdentityHeaders.commandSignature] = ed25519Sign(null, Buffer.concat(signedBytes(record)), this.commandKey).toString('base64url');
    } else if (AGENT_ACTED_RECORDS.has(message.type)) {
      // Few records (a retirement, a release, a probe): an Ed25519 signature each costs tens of µs.
      headers[IdentityHeaders.recordSignature] = ed25519Sign(null, Buffer.concat(signedBytes(record)), this.recordKey).toString('base64url');
    }
    return headers;
  }
}

/**
 * What an agent also signs with its publisher key, which its role certificate vouches for, so other
 * agents can check it (role-certificates.ts): its manifests, and its claims of a role.
 */
const PUBLISHER_SIGNED: ReadonlySet<string> = new Set(['WeightVersionPublished', 'MachineRegistered', 'MachineRoleChanged']);

/** Whether a message was sent as the controller (`controller`, or a part of it such as `controller/executor`). */
export function sentByController(message: RobustrlMessage): boolean {
  return message.source === 'controller' || message.source.startsWith('controller/');
}
