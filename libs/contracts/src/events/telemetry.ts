import { z } from 'zod';
import { event } from '../define-message';
import { Topics } from '../topics';
import { FaultSignal, IsoTime, MachineId, Role, RolePhase, Step } from './common';

export const GpuActivitySampled = event(
  'GpuActivitySampled',
  Topics.telemetry,
  'TensorCore activity of a machine over a sample interval, as seen by its agent (paper §4, trainer rule).',
  z.object({
    machineId: MachineId,
    sampledAt: IsoTime,
    intervalSeconds: z.number().positive(),
    /** Mean DCGM_FI_PROF_PIPE_TENSOR_ACTIVE over the machine's GPUs, 0..1. */
    tensorActive: z.number().min(0).max(1),
    perGpu: z.array(z.number().min(0).max(1)).optional(),
    source: z.enum(['dcgm', 'nvml', 'nvidia-smi', 'emulated', 'process-cpu']),
  }),
);

export const RolePhaseChanged = event(
  'RolePhaseChanged',
  Topics.telemetry,
  'A role entered a phase; detection rules are phase-aware (paper §4, Figure 5).',
  z.object({ machineId: MachineId, role: Role, phase: RolePhase, step: Step, changedAt: IsoTime }),
);

export const RolloutThroughputSampled = event(
  'RolloutThroughputSampled',
  Topics.telemetry,
  'Generation throughput of one rollout instance over a window, collected by the rollout manager (paper §4 ➀).',
  z.object({
    machineId: MachineId,
    rolloutId: z.string().min(1),
    sampledAt: IsoTime,
    windowSeconds: z.number().positive(),
    tokensPerSecond: z.number().nonnegative(),
    completedRequests: z.int().nonnegative(),
    inFlightRequests: z.int().nonnegative(),
    /** Requests parked on tool calls: zero throughput while waiting on tools is healthy. */
    awaitingTools: z.int().nonnegative(),
  }),
);

export const RolloutRequestsObserved = event(
  'RolloutRequestsObserved',
  Topics.telemetry,
  "What the router saw of one engine's real requests over a window: a wedged engine still answers /health and its agent still acks, but its requests stall or fail — evidence that finds it in seconds. Requests waiting on tools are not open at the engine, so they never count.",
  z.object({
    machineId: MachineId,
    rolloutId: z.string().min(1),
    observedAt: IsoTime,
    windowSeconds: z.number().positive(),
    /** Requests open at the engine now (sent, not yet answered). */
    openRequests: z.int().nonnegative(),
    /** How long the engine has produced no token while it had open requests (0 when none are open). */
    idleForMs: z.int().nonnegative(),
    /** Requests that failed on the engine in the window (connection refused or cut, idle upstream, 5xx, a broken stream). */
    failedRequests: z.int().nonnegative(),
    /** Requests the engine answered in the window. */
    succeededRequests: z.int().nonnegative(),
    /** Why the last failed one failed. */
    lastFailure: z.string().max(500).nullable(),
  }),
);

export const HeartbeatProbeRequested = event(
  'HeartbeatProbeRequested',
  Topics.heartbeat,
  "The detector asks a suspect machine's agent to prove it is alive (paper §4 ➁).",
  z.object({ probeId: z.string().min(1), machineId: MachineId, timeoutMs: z.int().positive() }),
);

export const HeartbeatAcked = event(
  'HeartbeatAcked',
  Topics.heartbeat,
  'An agent answered a heartbeat probe.',
  z.object({ probeId: z.string().min(1), machineId: MachineId, ackedAt: IsoTime }),
);

export const AgentFaultSignalled = event(
  'AgentFaultSignalled',
  Topics.heartbeat,
  'An explicit fault seen by the agent: role process exit, ECC/XID error, exception in the step. Confirms at once.',
  z.object({
    machineId: MachineId,
    role: Role,
    signal: FaultSignal,
    detail: z.string().max(4000),
    exitCode: z.int().nullable(),
    observedAt: IsoTime,
    /**
     * How long the agent had the evidence before it signalled (a load that never finished: since it
     * began; an engine that stopped answering: since its first unanswered look). A duration, not a
     * time, so an agent's skewed clock cannot move the fault. Absent: the fault is the signal's moment.
     */
    evidenceForMs: z.int().nonnegative().optional(),
    /**
     * A notice of departure (`node-draining`: a drain, a preemption): how long the machine has left as of
     * the signal. A duration, like `evidenceForMs`. Absent: no deadline was given.
     */
    departsInMs: z.int().nonnegative().optional(),
  }),
);
