import { z } from 'zod';
import { event } from '../define-message';
import { Topics } from '../topics';
import { IsoTime, MachineId, Role, TrainerEpoch, TrainingMode } from './common';

/**
 * Per-job detection settings (paper §4 defaults when absent). Carried by the job's own JobStarted
 * event so every detector instance, and the simulator, applies the same windows to the same job.
 */
export const DetectionSettings = z
  .object({
    /** Trainer rule: zero TensorCore activity inside the training phase for this long (paper: 300 s). */
    trainerIdleWindowSeconds: z.number().positive().optional(),
    /** Rollout rule: zero throughput for this long before a heartbeat probe (paper: 60 s). */
    rolloutSilentWindowSeconds: z.number().positive().optional(),
    /** Router evidence: an engine that produced no token for this long while it had open requests is wedged (default 10 s). */
    rolloutStallWindowSeconds: z.number().positive().optional(),
    /** Router evidence: this many failed requests in a row, none answered in between, condemn an engine (default 3, NeMo-RL's count). */
    rolloutFailedRequestsThreshold: z.int().positive().optional(),
    /** Liveness rule, every role and phase: no report from the machine's agent for this long before a heartbeat probe (default 60 s). */
    agentSilentWindowSeconds: z.number().positive().optional(),
    /** How long a probed agent has to answer before the fault is confirmed. */
    probeTimeoutSeconds: z.number().positive().optional(),
    /** After the detector was blind (its own input had a gap), how long windows wait before they may suspect a machine. */
    resumeGraceSeconds: z.number().nonnegative().optional(),
    /** Straggler rule: a rollout below `ratio` × its peers' median throughput for `windowSeconds`. */
    straggler: z
      .object({
        enabled: z.boolean().optional(),
        ratio: z.number().gt(0).lt(1).optional(),
        windowSeconds: z.number().positive().optional(),
        minPeers: z.int().min(2).optional(),
        /** `report` (default): a suspicion for operators; `replace`: confirm and replace the rollout. */
        action: z.enum(['report', 'replace']).optional(),
      })
      .optional(),
  })
  .meta({ id: 'DetectionSettings' });
export type DetectionSettings = z.infer<typeof DetectionSettings>;

export const JobStarted = event(
  'JobStarted',
  Topics.membership,
  'A job (or a resumed job) began; its first iteration is special for escalation (paper §5.1.2 rule 1).',
  z.object({
    mode: TrainingMode,
    resumedFromStep: z.int().nonnegative().nullable(),
    trainerMachines: z.int().nonnegative(),
    rolloutMachines: z.int().nonnegative(),
    detection: DetectionSettings.optional(),
    /** A task restart's: the trainer epoch its group starts at (RestartTask.trainerEpoch); absent: 0, the job's first. */
    trainerEpoch: TrainerEpoch.optional(),
  }),
);

/**
 * Whether a JobStarted announces a restarted task (every role starts over), not the job's first start:
 * it resumes from a checkpoint, or carries the trainer epoch of a task restart — one that came before
 * any checkpoint resumes from none.
 */
export const restartsTask = (d: { resumedFromStep: number | null; trainerEpoch?: number }): boolean =>
  d.resumedFromStep !== null || d.trainerEpoch !== undefined;

export const MachineRegistered = event(
  'MachineRegistered',
  Topics.membership,
  'An agent on a GPU machine joined the job with a role.',
  z.object({
    machineId: MachineId,
    role: Role,
    zone: z.string().min(1),
    hardwareClass: z.string().min(1),
    gpus: z.int().positive(),
    agentAddress: z.string().min(1),
    dpRank: z.int().nonnegative().nullable(),
    /**
     * `host:port` of the agent's UCX weight server (paper §5.2.1). Absent when the machine cannot take part
     * in weight transfer (the native UCX module is unavailable there): it then neither pulls nor relays.
     */
    weightsAddress: z.string().min(1).optional(),
    /**
     * The machine's address as other machines reach it (the pod IP, the host's interface): where a
     * trainer group whose rank 0 is this machine meets (torch's MASTER_ADDR). Absent from older agents,
     * whose group meets at their agent address's host.
     */
    hostAddress: z.string().min(1).optional(),
    /**
     * This agent process's registration epoch (unique per start). Commands name the incarnation they
     * were issued for, so a restarted agent never carries out what was meant for its predecessor.
     */
    incarnation: z.string().min(1).max(200).optional(),
    /**
     * Base URL of the OpenAI-compatible inference engine this rollout machine serves (vLLM, SGLang):
     * the router routes to it once the machine holds servable weights, and stops when the
     * machine is faulty, lent or gone. Absent: the engine joins the router only by its static list.
     */
    inferenceUrl: z.url({ protocol: /^https?$/ }).optional(),
    /**
     * The engines this machine serves when it hosts several (eight TP=1 engines, two TP=4 ones): each its
     * own id (`<machineId>/<name>`, what the router and trajectories name) and URL. The router, the pool
     * and reassignment address these engines; the machine stays the unit of faults, restarts and weight
     * copies (one host copy per machine, loaded into each of its engines: paper §5.2.1). Absent: the one
     * engine of `inferenceUrl`, named as the machine.
     */
    engines: z
      .array(z.object({ engineId: z.string().min(1).max(300), url: z.url({ protocol: /^https?$/ }) }))
      .min(1)
      .max(64)
      .refine((es) => new Set(es.map((e) => e.engineId)).size === es.length, { message: 'engine ids must be distinct' })
      .optional(),
    /**
     * The operator's certificate that this machine may take its role (`robustrl identity role-certificate`):
     * a trainer's registration without it is refused where records are signed (libs/bus role-certificates.ts).
     */
    roleCertificate: z.string().min(1).max(200).optional(),
  }),
);

export const MachineRoleChanged = event(
  'MachineRoleChanged',
  Topics.membership,
  'A machine moved between roles, e.g. a rollout lent to the trainer group as warm standby (paper §5.1.3).',
  z.object({
    machineId: MachineId,
    from: Role,
    to: Role,
    reason: z.string().min(1),
    /** To a training role: the certificate the controller's PromoteRolloutToTrainer carried (libs/bus role-certificates.ts). */
    roleCertificate: z.string().min(1).max(200).optional(),
  }),
);

export const MachineDeregistered = event(
  'MachineDeregistered',
  Topics.membership,
  'A machine left the job: isolated after a fault, replaced, or scaled down.',
  z.object({ machineId: MachineId, reason: z.string().min(1) }),
);

/** The engine kinds the router speaks (services/rollout-manager router/engines). */
export const RoutedEngineKind = z.enum(['vllm', 'sglang', 'llama.cpp']);

export const RouterEnginesAnnounced = event(
  'RouterEnginesAnnounced',
  Topics.membership,
  'The engines the job\'s router routes to now, as the rollout manager\'s pool decided them: router replicas follow it (docs/router.md "Routing for the cache", "Scaling out"). Announced on every change and again every few seconds, so a replica that starts late catches up.',
  z.object({
    engines: z
      .array(
        z.object({
          engineId: z.string().min(1).max(300),
          machineId: MachineId,
          url: z.url({ protocol: /^https?$/ }),
          kind: RoutedEngineKind,
          /** The weight version the engine's machine holds: the version its turns are tagged with. */
          weightVersion: z.int().nonnegative(),
          /**
           * Its machine is leaving (a notice, docs/planned-failures.md): a replica sends it no new request
           * and lets it go at this time, or once it holds none of the replica's requests. Absent: it routes.
           */
          leavesAt: IsoTime.optional(),
        }),
      )
      .max(10_000),
    announcedAt: IsoTime,
  }),
);
