import { z } from 'zod';
import { event } from '../define-message';
import { Topics } from '../topics';
import { Evidence, IsoTime, MachineId, Role } from './common';

const VerdictFields = {
  verdictId: z.string().min(1),
  machineId: MachineId,
  role: Role,
  /** The detection rule that produced the verdict, e.g. `trainer-idle`, `rollout-silent`, `straggler`. */
  rule: z.string().min(1),
  evidence: Evidence,
};

export const FaultSuspected = event(
  'FaultSuspected',
  Topics.verdicts,
  'A rule sees a possible fault that needs confirmation (e.g. zero rollout throughput for the window).',
  z.object(VerdictFields),
);

export const FaultConfirmed = event(
  'FaultConfirmed',
  Topics.verdicts,
  'A fault is confirmed; the controller acts on it.',
  z.object({
    ...VerdictFields,
    /** How the fault is handled: a hybrid-role fault is a trainer fault (paper §4). */
    handledAs: z.enum(['trainer', 'rollout']),
    /** Hardware evidence (ECC/XID, unreachable machine) means the machine itself must go. */
    machineFaulty: z.boolean(),
    /** Fault evidence start → verdict. */
    detectionLatencyMs: z.int().nonnegative(),
  }),
);

export const SuspicionCleared = event(
  'SuspicionCleared',
  Topics.verdicts,
  'A suspicion was withdrawn, e.g. the machine acked its heartbeat probe.',
  z.object({ ...VerdictFields, reason: z.string().min(1) }),
);

/**
 * Why the detector cannot trust its input: the broker is unreachable, its consumer stopped or lags
 * behind (records wait that are older than the tolerance), or it is (re)starting and has not caught up.
 * Silence seen through such a gap is the detector's own, not the machines'.
 */
export const InputGapReason = z.enum(['broker-unreachable', 'consumer-stopped', 'consumer-lag', 'consumer-restart']);
export type InputGapReason = z.infer<typeof InputGapReason>;

export const DetectionPaused = event(
  'DetectionPaused',
  Topics.verdicts,
  'The detector is blind to this job (its own input has a gap): time-based windows stop counting silence and no verdict comes from them until it resumes.',
  z.object({
    reason: InputGapReason,
    /** The last moment the input was known whole. */
    blindSince: IsoTime,
    detail: z.string().min(1),
  }),
);

export const DetectionResumed = event(
  'DetectionResumed',
  Topics.verdicts,
  'The detector sees this job again: the blind interval is not counted as silence, open suspicions start over, and machines get a grace period before a window can suspect them.',
  z.object({
    reason: InputGapReason,
    blindSince: IsoTime,
    resumedAt: IsoTime,
    blindMs: z.int().nonnegative(),
  }),
);
