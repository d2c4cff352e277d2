import { z } from 'zod';

/** Shared vocabulary of the messages. Kept small: every name here appears in the paper (§3–§5). */
export const MachineId = z.string().min(1).max(200);
export const IsoTime = z.iso.datetime({ offset: true });
export const Step = z.int().nonnegative();
/**
 * The fencing token of the trainer group (docs/contributors/recovery.md "Fencing"): 0 for the job's first group, one more for
 * every group the controller forms after it. A trainer publishes at the epoch it was started at.
 */
export const TrainerEpoch = z.int().nonnegative();

/** `hybrid`: trainer and rollout colocated on one machine (sync / semi-sync), paper §2.1, §4. */
export const Role = z.enum(['trainer', 'rollout', 'hybrid']);
export type Role = z.infer<typeof Role>;

export const TrainingMode = z.enum(['sync', 'semi-sync', 'async']);
export type TrainingMode = z.infer<typeof TrainingMode>;

/**
 * What a role is doing. Only `training` counts toward the trainer idle window (paper §4): context
 * switch, weight update, advantage computation and checkpoint have no TensorCore activity by nature.
 */
export const RolePhase = z.enum([
  'initializing',
  'training',
  'context-switch',
  'weight-update',
  'advantage',
  'checkpoint',
  'rollout',
  'awaiting-tools',
  'idle',
]);
export type RolePhase = z.infer<typeof RolePhase>;

/**
 * `weight-load-stalled`: an engine, alive and answering, did not finish loading a version within its deadline (the agent's word).
 * `engine-unresponsive`: an engine whose process runs did not answer its agent's look (its version, its activity) within that deadline.
 * `lease-expired`: the agent stopped its trainer itself after it could not reach the broker for its lease
 * (a partition): the role is down, the machine is not at fault.
 * `node-draining`: the machine's node is being drained (Ray's DrainNode, a preemption with a deadline in
 * the detail): the machine is going, so it is judged as the machine's fault, as the GPU's own errors are.
 */
export const FaultSignal = z.enum([
  'process-exited',
  'ecc-error',
  'xid-error',
  'step-exception',
  'weight-load-stalled',
  'engine-unresponsive',
  'lease-expired',
  'node-draining',
]);
export type FaultSignal = z.infer<typeof FaultSignal>;

/** Why a verdict was reached; every field optional because each rule has different evidence. */
export const Evidence = z
  .object({
    windowSeconds: z.number().nonnegative().optional(),
    lastActivityAt: IsoTime.nullable().optional(),
    faultEvidenceSince: IsoTime.optional(),
    probe: z.object({ probeId: z.string(), result: z.enum(['acked', 'timed-out']), latencyMs: z.number().nonnegative().optional() }).optional(),
    signal: FaultSignal.optional(),
    detail: z.string().max(4000).optional(),
    /**
     * A notice's deadline (`node-draining`): when the machine goes, as the detector reckons it — the
     * signal's arrival plus the time left the agent reported, so an agent's skewed clock cannot move it.
     */
    departsAt: IsoTime.optional(),
    peerMedian: z.number().nonnegative().optional(),
    observed: z.number().nonnegative().optional(),
  })
  .meta({ id: 'Evidence' });
export type Evidence = z.infer<typeof Evidence>;
