import { z } from 'zod';
import { AnyEnvelope } from './envelope';
import * as control from './events/control';
import * as membership from './events/membership';
import * as telemetry from './events/telemetry';
import * as training from './events/training';
import * as trajectories from './events/trajectories';
import * as verdicts from './events/verdicts';
import * as weights from './events/weights';
import { MessageDefinition } from './define-message';
import { compileExactCheck, ExactCheck } from './exact-check';
import { TopicName } from './topics';

/** Every message robustrl publishes. Adding one here is all it takes to route, validate and document it. */
export const MessageCatalog = {
  JobStarted: membership.JobStarted,
  MachineRegistered: membership.MachineRegistered,
  MachineRoleChanged: membership.MachineRoleChanged,
  MachineDeregistered: membership.MachineDeregistered,
  RouterEnginesAnnounced: membership.RouterEnginesAnnounced,
  GpuActivitySampled: telemetry.GpuActivitySampled,
  RolePhaseChanged: telemetry.RolePhaseChanged,
  RolloutThroughputSampled: telemetry.RolloutThroughputSampled,
  RolloutRequestsObserved: telemetry.RolloutRequestsObserved,
  HeartbeatProbeRequested: telemetry.HeartbeatProbeRequested,
  HeartbeatAcked: telemetry.HeartbeatAcked,
  AgentFaultSignalled: telemetry.AgentFaultSignalled,
  FaultSuspected: verdicts.FaultSuspected,
  FaultConfirmed: verdicts.FaultConfirmed,
  SuspicionCleared: verdicts.SuspicionCleared,
  DetectionPaused: verdicts.DetectionPaused,
  DetectionResumed: verdicts.DetectionResumed,
  RecoveryDecided: control.RecoveryDecided,
  RestartTrainerGroup: control.RestartTrainerGroup,
  PromoteRolloutToTrainer: control.PromoteRolloutToTrainer,
  ReplaceMachine: control.ReplaceMachine,
  RestartRolloutEngine: control.RestartRolloutEngine,
  RestartTask: control.RestartTask,
  RecoveryCommandSucceeded: control.RecoveryCommandSucceeded,
  RecoveryCommandFailed: control.RecoveryCommandFailed,
  RecoveryCompleted: control.RecoveryCompleted,
  ScaleRolloutPool: control.ScaleRolloutPool,
  RolloutPoolScaled: control.RolloutPoolScaled,
  RolloutPoolScaleFailed: control.RolloutPoolScaleFailed,
  TrajectoryTurnAppended: trajectories.TrajectoryTurnAppended,
  TrajectoryTurnsAppended: trajectories.TrajectoryTurnsAppended,
  TrajectoryStatusChanged: trajectories.TrajectoryStatusChanged,
  TrajectoriesReassigned: trajectories.TrajectoriesReassigned,
  TrajectoryRestartedFromPrompt: trajectories.TrajectoryRestartedFromPrompt,
  WeightVersionPublished: weights.WeightVersionPublished,
  WeightPullAssigned: weights.WeightPullAssigned,
  WeightPullCompleted: weights.WeightPullCompleted,
  WeightPullFailed: weights.WeightPullFailed,
  RelayJoined: weights.RelayJoined,
  RelayLeft: weights.RelayLeft,
  WeightVersionRetired: weights.WeightVersionRetired,
  TrainerReleased: weights.TrainerReleased,
  WeightPublicationRefused: weights.WeightPublicationRefused,
  TrainingStepStarted: training.TrainingStepStarted,
  TrainingStepCompleted: training.TrainingStepCompleted,
  CheckpointSaved: training.CheckpointSaved,
} as const;

type Catalog = typeof MessageCatalog;
export type MessageType = keyof Catalog;
export const MESSAGE_TYPES = Object.keys(MessageCatalog) as MessageType[];

/** A message of one type, inferred from its schema (never written by hand). */
export type MessageOf<T extends MessageType> = z.infer<Catalog[T]['schema']>;
export type DataOf<T extends MessageType> = MessageOf<T>['data'];
/** Any robustrl message: the discriminated union over `type`. */
export type RobustrlMessage = { [T in MessageType]: MessageOf<T> }[MessageType];

export function definitionOf(type: string): MessageDefinition | undefined {
  return Object.prototype.hasOwnProperty.call(MessageCatalog, type) ? (MessageCatalog as Record<string, MessageDefinition>)[type] : undefined;
}

export function topicOf(type: MessageType): TopicName {
  return MessageCatalog[type].topic;
}

/** Result of reading a message off the wire: a valid message, or the reason it is not one. */
export type DecodeResult = { ok: true; message: RobustrlMessage } | { ok: false; reason: string };

/**
 * Parse and validate raw bytes. Never throws: an invalid record must become a dead letter with its
 * reason, not an exception that blocks the partition.
 */
export function decodeMessage(bytes: Buffer | Uint8Array | string | null): DecodeResult {
  if (bytes === null) return { ok: false, reason: 'empty record value (tombstone)' };
  let json: unknown;
  try {
    // A Buffer is read where it lies (Buffer.from would copy every record first).
    json = JSON.parse(
      typeof bytes === 'string'
        ? bytes
        : Buffer.isBuffer(bytes)
          ? bytes.toString('utf8')
          : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'),
    );
  } catch (err) {
    return { ok: false, reason: `not JSON: ${(err as Error).message}` };
  }
  return validateMessage(json);
}

/** Each type's compiled quick check (null: its schema has none), built on first use. */
const exactChecks = new Map<string, ExactCheck | null>();
function exactCheckOf(def: MessageDefinition): ExactCheck | null {
  let check = exactChecks.get(def.type);
  if (check === undefined) exactChecks.set(def.type, (check = compileExactCheck(def.schema)));
  return check;
}

export function validateMessage(json: unknown): DecodeResult {
  // The common case first: a known type at its version parses once, against its own schema (which
  // holds the envelope's fields too). Anything else takes the slow path below for a precise reason.
  const claimed = typeof json === 'object' && json !== null ? (json as { type?: unknown; schemaVersion?: unknown }) : null;
  const known = typeof claimed?.type === 'string' ? definitionOf(claimed.type) : undefined;
  if (known && known.schemaVersion === claimed?.schemaVersion) {
    // Well-formed as zod would return it: the value stands for zod's output (exact-check.ts).
    if (exactCheckOf(known)?.(json)) return { ok: true, message: json as RobustrlMessage };
    const parsed = known.schema.safeParse(json);
    if (parsed.success) return { ok: true, message: parsed.data as RobustrlMessage };
  }
  const envelope = AnyEnvelope.safeParse(json);
  if (!envelope.success) return { ok: false, reason: `invalid envelope: ${z.prettifyError(envelope.error)}` };
  const def = definitionOf(envelope.data.type);
  if (!def) return { ok: false, reason: `unknown message type '${envelope.data.type}'` };
  if (def.schemaVersion !== envelope.data.schemaVersion) {
    return {
      ok: false,
      reason: `unsupported schemaVersion ${envelope.data.schemaVersion} for ${def.type} (this build reads ${def.schemaVersion})`,
    };
  }
  const parsed = def.schema.safeParse(json);
  if (!parsed.success) return { ok: false, reason: `invalid ${def.type}: ${z.prettifyError(parsed.error)}` };
  return { ok: true, message: parsed.data as RobustrlMessage };
}

export function encodeMessage(message: RobustrlMessage): Buffer {
  return Buffer.from(JSON.stringify(message), 'utf8');
}
