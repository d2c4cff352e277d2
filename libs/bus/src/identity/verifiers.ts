import { verify as ed25519Verify, KeyObject } from 'node:crypto';
import type { RobustrlMessage } from '@robustrl/contracts';
import { controlPlaneKeyOf, controlPlaneRecordKeyPairOf, machineKeyOf } from './identity-keys';
import {
  AGENT_ACTED_RECORDS,
  CONTROL_PLANE_RECORDS,
  hmacOf,
  IdentityHeaders,
  machineClaimsOf,
  RecordVerifier,
  SignedRecord,
  signedBytes,
} from './record-identity';
import { manifestPublisherProblem, roleClaimProblem } from './role-certificates';
import { sentByController } from './signers';

type Verifiable = SignedRecord & { headers: Readonly<Record<string, string>> };

/** Machine keys recomputed per record would cost a second HMAC each: kept, up to this many machines. */
const MACHINE_KEY_CACHE = 100_000;

/**
 * What the control plane accepts (it holds the identity secret, so it can check everyone):
 *  1. every record is signed: by a machine (`machine:<id>`) or by a service (`service:<name>`);
 *  2. the signature holds under that signer's key;
 *  3. a machine speaks only for itself: its message's source is `agent/<id>` and every field naming the
 *     machine speaking (record-identity.ts `machineClaimsOf`) is `<id>`; and machines issue no commands
 *     nor the control plane's decisions (CONTROL_PLANE_RECORDS);
 *  4. a machine claims a training role only with its role certificate (role-certificates.ts).
 * Control-plane processes share the control plane's key: among them a signature tells the control plane
 * from the machines, not one service from another (per-service write rights are the broker's ACLs).
 */
export class ControlPlaneVerifier implements RecordVerifier {
  private readonly controlPlaneKey: Buffer;
  private readonly recordPublicKey: KeyObject;
  private readonly machineKeys = new Map<string, Buffer>();

  constructor(private readonly secret: string) {
    this.controlPlaneKey = controlPlaneKeyOf(secret);
    this.recordPublicKey = controlPlaneRecordKeyPairOf(secret).publicKey;
  }

  verify(record: Verifiable, message: RobustrlMessage): string | null {
    const signer = record.headers[IdentityHeaders.signer];
    const signature = record.headers[IdentityHeaders.signature];
    if (!signer || !signature) return `unsigned record: this deployment accepts only signed records (${IdentityHeaders.signer}, ${IdentityHeaders.signature})`;
    const [kind, id] = splitSigner(signer);
    if (kind === 'machine') {
      if (!sameMac(hmacOf(this.machineKey(id), record), signature)) return `the signature does not hold for ${signer}`;
      const claims = machineClaimsOf(message);
      if (claims.source !== `agent/${id}`) return `signed by ${signer} but sent as '${claims.source}': a machine speaks only for itself`;
      const other = claims.machineIds.find((m) => m !== id);
      if (other !== undefined) return `signed by ${signer} but speaks for machine '${other}': a machine speaks only for itself`;
      if (message.kind === 'command') return `${message.type} is a command, and machines issue none (signed by ${signer})`;
      if (CONTROL_PLANE_RECORDS.has(message.type)) return `${message.type} is the control plane's to publish, not a machine's (signed by ${signer})`;
      return roleClaimProblem(message, this.recordPublicKey);
    }
    if (kind === 'service') {
      return sameMac(hmacOf(this.controlPlaneKey, record), signature) ? null : `the signature does not hold for ${signer}`;
    }
    return `unknown signer '${signer}' (expected machine:<id> or service:<name>)`;
  }

  private machineKey(machineId: string): Buffer {
    let key = this.machineKeys.get(machineId);
    if (!key) {
      if (this.machineKeys.size >= MACHINE_KEY_CACHE) this.machineKeys.clear();
      this.machineKeys.set(machineId, (key = machineKeyOf(this.secret, machineId)));
    }
    return key;
  }
}

/**
 * What an agent accepts: a command only when it is sent as the controller by the control plane and
 * carries the controller's command signature (Ed25519, checked with the controller's public key); a
 * record of AGENT_ACTED_RECORDS (a retirement, a release, a probe, a deregistration) only with the control plane's record
 * signature, where the agent was given that public key; weight assignments by their grants
 * (pull-grants.ts); and, with that key, a machine's claim of a training role (a registration as trainer, a
 * promotion) only with its role certificate, signed under the key it vouches for (role-certificates.ts) — the first launch's rank 0 is the
 * group's rendezvous — and a weight manifest only from a certified trainer, under its publisher key.
 * Whatever else it reads (other registrations, telemetry) it takes as the topic ACLs let it through —
 * it holds no key to check another machine's HMAC, by design.
 */
export class AgentCommandVerifier implements RecordVerifier {
  constructor(
    private readonly controllerPublicKey: KeyObject,
    private readonly controlPlanePublicKey?: KeyObject,
  ) {}

  verify(record: Verifiable, message: RobustrlMessage): string | null {
    if (message.kind !== 'command') {
      if (!this.controlPlanePublicKey) return null;
      if (AGENT_ACTED_RECORDS.has(message.type)) return this.verifyRecord(record, message);
      if (message.type === 'WeightVersionPublished') return manifestPublisherProblem(record, message, this.controlPlanePublicKey);
      return roleClaimProblem(message, this.controlPlanePublicKey, record);
    }
    const signer = record.headers[IdentityHeaders.signer];
    const signature = record.headers[IdentityHeaders.commandSignature];
    if (!signer?.startsWith('service:') || !sentByController(message))
      return `${message.type} not issued by the controller (source '${message.source}', signer '${signer ?? 'none'}'): not executed`;
    if (!signature) return `${message.type} carries no controller command signature: not executed`;
    const valid = ed25519Verify(null, Buffer.concat(signedBytes(record)), this.controllerPublicKey, Buffer.from(signature, 'base64url'));
    return valid ? null : `${message.type} carries a controller signature that does not hold: not executed`;
  }

  private verifyRecord(record: Verifiable, message: RobustrlMessage): string | null {
    const signer = record.headers[IdentityHeaders.signer];
    const signature = record.headers[IdentityHeaders.recordSignature];
    if (!signer?.startsWith('service:')) return `${message.type} not published by the control plane (signer '${signer ?? 'none'}'): ignored`;
    if (!signature) return `${message.type} carries no control-plane record signature: ignored`;
    const valid = ed25519Verify(null, Buffer.concat(signedBytes(record)), this.controlPlanePublicKey!, Buffer.from(signature, 'base64url'));
    return valid ? null : `${message.type} carries a control-plane record signature that does not hold: ignored`;
  }
}

function splitSigner(signer: string): [string, string] {
  const at = signer.indexOf(':');
  return at < 0 ? [signer, ''] : [signer.slice(0, at), signer.slice(at + 1)];
}

/** Constant time over the signature's length: the time taken does not tell how much of it was right. */
function sameMac(expected: string, presented: string): boolean {
  if (expected.length !== presented.length) return false;
  let difference = 0;
  for (let i = 0; i < expected.length; i++) difference |= expected.charCodeAt(i) ^ presented.charCodeAt(i);
  return difference === 0;
}
