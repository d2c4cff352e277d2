import { createHmac } from 'node:crypto';
import type { RobustrlMessage } from '@robustrl/contracts';

/**
 * Who speaks on the bus ("a machine speaks only for itself"). Every record a process publishes
 * carries who signed it and a signature over its topic, key and bytes; consumers that can check it drop
 * (dead-letter, with the reason) a record whose signature does not hold or whose content claims someone
 * else than its signer. Keys: identity-keys.ts; the rules each side applies: the verifiers beside this file.
 */
export const IdentityHeaders = {
  /** `machine:<machineId>` (an agent) or `service:<name>` (a control-plane service). */
  signer: 'robustrl-signer',
  /** HMAC-SHA256 of the signed bytes, base64url, under the signer's key. */
  signature: 'robustrl-signature',
  /** On the controller's commands: Ed25519 over the same bytes, which agents check with its public key. */
  commandSignature: 'robustrl-command-signature',
  /** On the records of AGENT_ACTED_RECORDS: Ed25519 over the same bytes under the control plane's record key. */
  recordSignature: 'robustrl-control-plane-signature',
  /** On an agent's manifests and role claims: Ed25519 over the same bytes under its publisher key (role-certificates.ts). */
  publisherSignature: 'robustrl-publisher-signature',
} as const;

/**
 * What the control plane publishes that agents act on beyond commands: a version retired (its copies
 * dropped), the trainer released (its memory freed), a heartbeat probe (answered), a machine taken out
 * of the job (a first launch's roster drops it). Agents cannot check the control plane's HMAC, so these
 * carry an Ed25519 signature too; an agent with the control plane's public key acts on none without it.
 * (Pull assignments carry their own grants: pull-grants.ts.)
 */
export const AGENT_ACTED_RECORDS: ReadonlySet<string> = new Set(['WeightVersionRetired', 'TrainerReleased', 'HeartbeatProbeRequested', 'MachineDeregistered']);

/**
 * Decisions only the control plane makes, which a machine never publishes: besides AGENT_ACTED_RECORDS,
 * the registry's assignments, refusals and relay changes, and the detector's confirmed faults. The
 * control plane refuses them from a machine's key (a machine speaking "for itself" about these would
 * still steer every reader: the registry folds a retirement it reads as its own).
 */
export const CONTROL_PLANE_RECORDS: ReadonlySet<string> = new Set([
  ...AGENT_ACTED_RECORDS,
  'WeightPullAssigned',
  'WeightPublicationRefused',
  'RelayJoined',
  'RelayLeft',
  'FaultConfirmed',
]);

/** What a record's signature covers: its topic (unprefixed, as in the catalog), its key and its bytes. */
export interface SignedRecord {
  topic: string;
  key: string | null;
  value: Buffer;
}

/** Signs what one process publishes: the headers to add to the record. */
export interface RecordSigner {
  sign(record: SignedRecord, message: RobustrlMessage): Record<string, string>;
}

/**
 * Whether a consumed record speaks for whom it claims: null when it does, else the reason it is
 * dropped (it goes to the dead-letter topic with that reason; the partition moves on).
 */
export interface RecordVerifier {
  verify(record: SignedRecord & { headers: Readonly<Record<string, string>> }, message: RobustrlMessage): string | null;
}

/** The bytes a signature is computed over: topic, key and value, each delimited so none can slide into another. */
export function signedBytes(record: SignedRecord): Buffer[] {
  return [Buffer.from(`${record.topic}\u0000${record.key ?? ''}\u0000`, 'utf8'), record.value];
}

export function hmacOf(key: Buffer, record: SignedRecord): string {
  // The same bytes as signedBytes, without allocating the delimiter buffer (this runs per record).
  return createHmac('sha256', key)
    .update(`${record.topic}\u0000${record.key ?? ''}\u0000`, 'utf8')
    .update(record.value)
    .digest('base64url');
}

/**
 * Whom an agent's message speaks for: its source (`agent/<id>`), and the fields that name the machine
 * speaking — `data.machineId` (registrations, samples, phases, faults, command answers), `data.pullerId`
 * (a pull's outcome) and `data.sources[].instanceId` (the ranks a trainer publishes a version from).
 * Other machine ids in a message are references (a pull's `sourceId`), not claims.
 */
export function machineClaimsOf(message: RobustrlMessage): { source: string; machineIds: string[] } {
  const data = message.data as { machineId?: unknown; pullerId?: unknown; sources?: unknown };
  const machineIds: string[] = [];
  if (typeof data.machineId === 'string') machineIds.push(data.machineId);
  if (typeof data.pullerId === 'string') machineIds.push(data.pullerId);
  if (Array.isArray(data.sources))
    for (const s of data.sources as Array<{ instanceId?: unknown }>) if (typeof s?.instanceId === 'string') machineIds.push(s.instanceId);
  return { source: message.source, machineIds };
}
