import { z } from 'zod';
import { event } from '../define-message';
import { Topics } from '../topics';
import { Evidence, MachineId, Role } from './common';

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
