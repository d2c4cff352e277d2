import { DEFAULT_AGENT_LEASE_SECONDS } from './broker-lease';
import { z } from 'zod';
import { machineKeyFromEnv, roleCertificateFromEnv } from '@robustrl/bus';
import { Role } from '@robustrl/contracts';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { SCOPE_SETTINGS } from '@robustrl/service-kit';
import { EngineEndpoint, enginesFromEnv } from './engine-endpoints';
import { NoticeSource, parseNoticeSources } from './notices/cloud-notices';

/** Everything an agent needs to know about its machine and its role process, validated at start. */
export interface AgentConfig {
  jobId: string;
  machineId: string;
  role: Role;
  zone: string;
  hardwareClass: string;
  gpus: number;
  dpRank: number | null;
  /** Port of the local HTTP API the framework talks to (ROBUSTRL_HTTP_HOST, loopback by default). */
  apiPort: number;
  /** The same API on a Unix socket at this path too (ROBUSTRL_AGENT_SOCKET), for a framework in another container of the node. */
  apiSocket: string | undefined;
  /**
   * The role process's own token for that API, given to it as ROBUSTRL_AGENT_TOKEN (agentApiEnv adds it
   * to the API's caller tokens): minted at start, so it is valid at this agent only — not a token the
   * operator provisioned, which every agent of a pool accepts. None when the API asks for none.
   */
  apiToken: string | undefined;
  /** Shell command of the role process per role; none means the framework is started by someone else. */
  roleCommands: Partial<Record<Role, string>>;
  /**
   * Who carries out the controller's commands on the role's processes (docs/integrators/integrate-your-job.md):
   * `supervise` — the agent, parent of the role process (its command run again); `cooperate` — the
   * framework, which owns its processes and follows the agent's commands (GET /v1/commands).
   */
  integration: 'supervise' | 'cooperate';
  /** Cooperate mode: how long after its last poll a framework still counts as following commands. */
  frameworkAttachedMs: number;
  gpuSampleSeconds: number;
  dcgmUrl: string | undefined;
  preferredGpuSource: 'dcgm' | 'nvml' | 'nvidia-smi' | 'emulated' | 'process-cpu' | undefined;
  /** SIGTERM → SIGKILL grace when stopping the role process. */
  stopGraceMs: number;
  /** Tolerance when judging a command without an incarnation by its time against the agent's start. */
  commandClockSkewMs: number;
  /**
   * Base URL of this rollout machine's inference engine, as the router reaches it: registered so the
   * engine joins the router once the machine holds weights.
   */
  inferenceUrl: string | undefined;
  /**
   * Every engine the machine hosts (engine-endpoints.ts): the one of `inferenceUrl` named as the machine,
   * or those of ROBUSTRL_ENGINES (several on one machine), each loaded with the machine's weight versions.
   */
  engines: EngineEndpoint[];
  /**
   * Who loads a pulled version into the engine: `vllm` — this agent, through the engine's own routes and
   * robustrl's worker extension (engine-weights/); `off` — the framework itself (from /v1/weights/latest).
   */
  engineWeights: 'off' | 'vllm';
  /** The trainer role's lease on broker contact (ROBUSTRL_AGENT_LEASE_SECONDS; 0: none). */
  leaseMs: number;
  /** How long a version's load into the engine may take before the engine counts as wedged (ROBUSTRL_ENGINE_LOAD_DEADLINE_SECONDS). */
  engineLoadDeadlineMs: number;
  /** The request manager, where a restarted trainer's kept batch is fetched from. */
  requestManagerUrl: string | undefined;
  /** Its bearer token (ROBUSTRL_REQUEST_MANAGER_TOKEN), when its API asks for one. */
  requestManagerToken: string | undefined;
  /** The port a trainer group meets on at rank 0's host (torch's MASTER_PORT), the same on every agent. */
  rendezvousPort: number;
  /**
   * This machine's address as other machines reach it (ROBUSTRL_ADVERTISE_HOST: the pod IP, the host's
   * interface): registered, so a trainer group whose rank 0 is this machine meets here.
   */
  hostAddress: string;
  /**
   * With it, a trainer's first launch waits for this many trainer machines to register and starts with
   * its rank, the world size and rank 0's host (first-launch.ts); without it, the first launch
   * is given only what the agent's own environment holds.
   */
  trainerWorldSize: number | null;
  /** This machine's own key (ROBUSTRL_MACHINE_KEY), with identity on: the weight plane opens its pull grants with it. */
  machineKey: Buffer | undefined;
  /** The operator's certificate for this machine's starting role (ROBUSTRL_ROLE_CERTIFICATE), shown in its registration. */
  roleCertificate: string | undefined;
  /**
   * The cloud's notices that this machine is about to go (notices/cloud-notices.ts), read from its
   * metadata endpoint and reported as `node-draining` with their deadline; no sources: none read.
   */
  notices: { sources: NoticeSource[]; pollMs: number; vmName: string };
  /** SIGTERM to SIGKILL (the pod's termination grace period): a SIGTERM while roles run is then a notice (notices/termination-notice.ts). 0: none. */
  terminationGraceMs: number;
  /** The UCX weight server and pull limits (paper §5.2.1). */
  weights: {
    bindHost: string | null;
    port: number;
    advertiseHost: string;
    shmDir: string;
    chunkBytes: number;
    maxBytesPerSecond: number;
    getsInFlight: number;
    opTimeoutMs: number;
    catalogWaitMs: number;
    cudaDevice: number | 'auto' | 'none';
  };
}

const Env = z.object({
  ROBUSTRL_JOB_ID: z.string({ error: 'required: the job this machine works for' }).min(1),
  ROBUSTRL_MACHINE_ID: z.string({ error: "required: this machine's id (the host name, or the pod name on Kubernetes)" }).min(1),
  ROBUSTRL_ROLE: z.enum(Role.options, { error: 'required, one of trainer, rollout, hybrid' }),
  ROBUSTRL_ZONE: z.string().min(1).default('default'),
  ROBUSTRL_HARDWARE_CLASS: z.string().min(1).default('default'),
  ROBUSTRL_GPUS: z.coerce.number().int().positive().default(8),
  ROBUSTRL_DP_RANK: z.coerce.number().int().nonnegative().optional(),
  ROBUSTRL_AGENT_PORT: z.coerce.number().int().min(0).max(65535).default(8086),
  ROBUSTRL_ROLE_COMMAND: z.string().min(1).optional(),
  ROBUSTRL_TRAINER_COMMAND: z.string().min(1).optional(),
  ROBUSTRL_ROLLOUT_COMMAND: z.string().min(1).optional(),
  ROBUSTRL_HYBRID_COMMAND: z.string().min(1).optional(),
  ROBUSTRL_INTEGRATION: z
    .enum(['supervise', 'cooperate'], {
      error: "'supervise' (the agent runs the role command) or 'cooperate' (the framework owns its processes and follows GET /v1/commands)",
    })
    .default('supervise'),
  // Past it without a poll, a cooperating framework is taken for gone: the agent stops vouching for its role.
  ROBUSTRL_FRAMEWORK_ATTACHED_SECONDS: z.coerce.number().positive().default(45),
  ROBUSTRL_GPU_SAMPLE_SECONDS: z.coerce.number().positive().default(10),
  ROBUSTRL_DCGM_URL: z.url().optional(),
  ROBUSTRL_GPU_SOURCE: z.enum(['dcgm', 'nvml', 'nvidia-smi', 'emulated', 'process-cpu']).optional(),
  ROBUSTRL_STOP_GRACE_SECONDS: z.coerce.number().nonnegative().default(10),
  // A command that names no incarnation and is older than the agent's start by more than this is a replay.
  ROBUSTRL_COMMAND_CLOCK_SKEW_SECONDS: z.coerce.number().nonnegative().default(5),
  // What other machines reach this one at: the trainer group's rendezvous (rank 0's), and by default the weight server's address.
  ROBUSTRL_ADVERTISE_HOST: z.string().min(1).default('127.0.0.1'),
  ROBUSTRL_TRAINER_WORLD_SIZE: z.coerce.number().int().positive().optional(),
  // Unset: the advertised address, so the weight server listens on that interface only.
  ROBUSTRL_WEIGHTS_BIND_HOST: z.ipv4({ error: 'an IPv4 address to bind (UCX listens on IPv4)' }).optional(),
  ROBUSTRL_WEIGHTS_PORT: z.coerce.number().int().min(0).max(65535).default(13337),
  // What other machines dial: the pod IP / host name on a cluster (the bind address may be 0.0.0.0).
  ROBUSTRL_WEIGHTS_ADVERTISE_HOST: z.string().min(1).optional(),
  ROBUSTRL_WEIGHTS_SHM_DIR: z.string().min(1).default('/dev/shm'),
  ROBUSTRL_WEIGHTS_CHUNK_MIB: z.coerce.number().positive().default(8),
  ROBUSTRL_WEIGHTS_MAX_MIB_PER_SECOND: z.coerce.number().nonnegative().default(0),
  // GETs of one bucket outstanding at once: device memory moves at link speed only with several in flight.
  ROBUSTRL_WEIGHTS_GETS_IN_FLIGHT: z.coerce.number().int().min(1).max(256).default(8),
  ROBUSTRL_WEIGHTS_OP_TIMEOUT_SECONDS: z.coerce.number().positive().default(30),
  ROBUSTRL_WEIGHTS_CATALOG_WAIT_SECONDS: z.coerce.number().positive().default(10),
  // The CUDA device whose memory the weight plane moves: auto (device 0 where UCX has CUDA), none, or an ordinal.
  ROBUSTRL_WEIGHTS_CUDA_DEVICE: z
    .union([z.enum(['auto', 'none']), z.coerce.number().int().nonnegative()], { error: "'auto', 'none' or a CUDA device ordinal" })
    .default('auto'),
  ROBUSTRL_REQUEST_MANAGER_URL: z.url({ protocol: /^https?$/, error: "the request manager's base URL, http(s)://host:port" }).optional(),
  ROBUSTRL_REQUEST_MANAGER_TOKEN: z.string().trim().min(1).optional(),
  ROBUSTRL_RENDEZVOUS_PORT: z.coerce.number().int().min(1).max(65535).default(29500),
  // A load past it is a fault of the engine (engine-weight-sync.ts): the controller restarts the engine.
  ROBUSTRL_ENGINE_LOAD_DEADLINE_SECONDS: z.coerce.number().positive().default(120),
  /**
   * The trainer's lease (broker-lease.ts): with no record taken by the broker for this long, the agent stops
   * its trainer or hybrid role itself. Below the control plane's agent-silent window plus its probe
   * timeout (60 + 10 s by default), so a partitioned trainer stops before its replacement starts. 0: no lease.
   */
  ROBUSTRL_AGENT_LEASE_SECONDS: z.coerce.number().nonnegative().default(DEFAULT_AGENT_LEASE_SECONDS),
  ROBUSTRL_INFERENCE_URL: z.url({ protocol: /^https?$/, error: "the engine's base URL, http(s)://host:port" }).optional(),
  ROBUSTRL_AGENT_SOCKET: z
    .string()
    .regex(/^\/\S+$/, { error: "the socket's absolute path, e.g. /run/robustrl/agent.sock" })
    .optional(),
  // Several engines on the machine: name=url, comma separated (engine-endpoints.ts checks the list).
  ROBUSTRL_ENGINES: z.string().optional(),
  // Cloud notices: format=url, comma separated (notices/cloud-notices.ts checks the list).
  ROBUSTRL_AGENT_NOTICES: z.string().optional(),
  ROBUSTRL_AGENT_NOTICE_POLL_SECONDS: z.coerce.number().positive().default(5),
  // The pod's terminationGracePeriodSeconds: SIGTERM is then a notice with that much time (0: SIGTERM stops at once).
  ROBUSTRL_AGENT_TERMINATION_GRACE_SECONDS: z.coerce.number().nonnegative().default(0),
  // Azure's scheduled events name the VMs they concern: this one's name (default: the host name).
  ROBUSTRL_AGENT_AZURE_VM_NAME: z.string().trim().min(1).optional(),
  ROBUSTRL_ENGINE_WEIGHTS: z
    .enum(['off', 'vllm'], { error: "'off' (the framework loads versions) or 'vllm' (the agent loads them into its vLLM engine)" })
    .default('off'),
});

const MiB = 1 << 20;

export function agentConfigFromEnv(env: NodeJS.ProcessEnv): AgentConfig {
  const parsed = Env.safeParse(Object.fromEntries(Object.entries(env).filter(([k, v]) => k.startsWith('ROBUSTRL_') && v !== '')));
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'env'}: ${i.message}`).join('; ');
    throw new Error(`agent configuration is invalid: ${problems}`);
  }
  const e = parsed.data;
  // ROBUSTRL_ROLE_COMMAND is the command of the machine's starting role; per-role commands let a
  // rollout machine start a trainer process when it is promoted to warm standby (paper §5.1.3).
  const roleCommands: Partial<Record<Role, string>> = {
    trainer: e.ROBUSTRL_TRAINER_COMMAND,
    rollout: e.ROBUSTRL_ROLLOUT_COMMAND,
    hybrid: e.ROBUSTRL_HYBRID_COMMAND,
  };
  if (e.ROBUSTRL_ROLE_COMMAND) roleCommands[e.ROBUSTRL_ROLE] ??= e.ROBUSTRL_ROLE_COMMAND;
  const commands = ['ROBUSTRL_ROLE_COMMAND', 'ROBUSTRL_TRAINER_COMMAND', 'ROBUSTRL_ROLLOUT_COMMAND', 'ROBUSTRL_HYBRID_COMMAND'] as const;
  const given = commands.filter((name) => e[name] !== undefined);
  if (e.ROBUSTRL_INTEGRATION === 'cooperate' && given.length)
    throw new Error(
      `agent configuration is invalid: ${given.join(', ')}: not with ROBUSTRL_INTEGRATION=cooperate, where the framework starts its own processes`,
    );
  let engines: EngineEndpoint[];
  let noticeSources: NoticeSource[];
  try {
    engines = enginesFromEnv(e.ROBUSTRL_MACHINE_ID, e);
    noticeSources = parseNoticeSources(e.ROBUSTRL_AGENT_NOTICES ?? '');
  } catch (err) {
    throw new Error(`agent configuration is invalid: ${(err as Error).message}`);
  }
  return {
    jobId: e.ROBUSTRL_JOB_ID,
    machineId: e.ROBUSTRL_MACHINE_ID,
    role: e.ROBUSTRL_ROLE,
    zone: e.ROBUSTRL_ZONE,
    hardwareClass: e.ROBUSTRL_HARDWARE_CLASS,
    gpus: e.ROBUSTRL_GPUS,
    dpRank: e.ROBUSTRL_DP_RANK ?? null,
    inferenceUrl: e.ROBUSTRL_INFERENCE_URL,
    engines,
    engineWeights: e.ROBUSTRL_ENGINE_WEIGHTS,
    engineLoadDeadlineMs: Math.round(e.ROBUSTRL_ENGINE_LOAD_DEADLINE_SECONDS * 1000),
    leaseMs: Math.round(e.ROBUSTRL_AGENT_LEASE_SECONDS * 1000),
    requestManagerUrl: e.ROBUSTRL_REQUEST_MANAGER_URL,
    requestManagerToken: e.ROBUSTRL_REQUEST_MANAGER_TOKEN,
    rendezvousPort: e.ROBUSTRL_RENDEZVOUS_PORT,
    hostAddress: e.ROBUSTRL_ADVERTISE_HOST,
    trainerWorldSize: e.ROBUSTRL_TRAINER_WORLD_SIZE ?? null,
    apiPort: e.ROBUSTRL_AGENT_PORT,
    apiSocket: e.ROBUSTRL_AGENT_SOCKET,
    apiToken: roleApiToken(env),
    roleCommands,
    integration: e.ROBUSTRL_INTEGRATION,
    frameworkAttachedMs: Math.round(e.ROBUSTRL_FRAMEWORK_ATTACHED_SECONDS * 1000),
    gpuSampleSeconds: e.ROBUSTRL_GPU_SAMPLE_SECONDS,
    dcgmUrl: e.ROBUSTRL_DCGM_URL,
    preferredGpuSource: e.ROBUSTRL_GPU_SOURCE,
    stopGraceMs: Math.round(e.ROBUSTRL_STOP_GRACE_SECONDS * 1000),
    commandClockSkewMs: Math.round(e.ROBUSTRL_COMMAND_CLOCK_SKEW_SECONDS * 1000),
    machineKey: machineKeyFromEnv(env),
    roleCertificate: roleCertificateFromEnv(env, e.ROBUSTRL_MACHINE_ID, e.ROBUSTRL_ROLE),
    notices: {
      sources: noticeSources,
      pollMs: Math.round(e.ROBUSTRL_AGENT_NOTICE_POLL_SECONDS * 1000),
      vmName: e.ROBUSTRL_AGENT_AZURE_VM_NAME ?? hostname(),
    },
    terminationGraceMs: Math.round(e.ROBUSTRL_AGENT_TERMINATION_GRACE_SECONDS * 1000),
    weights: {
      bindHost: e.ROBUSTRL_WEIGHTS_BIND_HOST ?? null,
      port: e.ROBUSTRL_WEIGHTS_PORT,
      advertiseHost: e.ROBUSTRL_WEIGHTS_ADVERTISE_HOST ?? e.ROBUSTRL_ADVERTISE_HOST,
      shmDir: e.ROBUSTRL_WEIGHTS_SHM_DIR,
      chunkBytes: Math.round(e.ROBUSTRL_WEIGHTS_CHUNK_MIB * MiB),
      maxBytesPerSecond: Math.round(e.ROBUSTRL_WEIGHTS_MAX_MIB_PER_SECOND * MiB),
      getsInFlight: e.ROBUSTRL_WEIGHTS_GETS_IN_FLIGHT,
      opTimeoutMs: Math.round(e.ROBUSTRL_WEIGHTS_OP_TIMEOUT_SECONDS * 1000),
      catalogWaitMs: Math.round(e.ROBUSTRL_WEIGHTS_CATALOG_WAIT_SECONDS * 1000),
      cudaDevice: e.ROBUSTRL_WEIGHTS_CUDA_DEVICE,
    },
  };
}

/** A fresh token for the role process where the agent's API takes tokens (any scope set), else none: an open API needs none. */
function roleApiToken(env: NodeJS.ProcessEnv): string | undefined {
  const guarded = Object.values(SCOPE_SETTINGS).some((s) => env[`ROBUSTRL_HTTP_${s}`]?.trim() || env[`ROBUSTRL_HTTP_${s}_FILE`]?.trim());
  return guarded ? randomBytes(24).toString('base64url') : undefined;
}

/** The settings the agent's API is served with: its own, and the role process's token among the caller tokens. */
export function agentApiEnv(env: NodeJS.ProcessEnv, apiToken: string | undefined): NodeJS.ProcessEnv {
  if (!apiToken) return env;
  return { ...env, ROBUSTRL_HTTP_TOKENS: [env.ROBUSTRL_HTTP_TOKENS?.trim(), apiToken].filter(Boolean).join(',') };
}
