import { ConfigError, Env, Setting } from '@robustrl/config';
import { machineKeyFromEnv, roleCertificateFromEnv } from '@robustrl/bus';
import { Role } from '@robustrl/contracts';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { httpTokensGiven } from '@robustrl/service-kit';
import { EngineEndpoint, enginesFromEnv } from './engine-endpoints';
import { NoticeSource, parseNoticeSources } from './notices/cloud-notices';
import * as S from './agent-settings';

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

const MiB = 1 << 20;

/** Every variable agentConfigFromEnv reads (agent-settings.ts), by the name it is read as. */
const SETTINGS = {
  jobId: S.JOB_ID,
  machineId: S.MACHINE_ID,
  role: S.ROLE,
  zone: S.ZONE,
  hardwareClass: S.HARDWARE_CLASS,
  gpus: S.GPUS,
  dpRank: S.DP_RANK,
  apiPort: S.AGENT_PORT,
  roleCommand: S.ROLE_COMMAND,
  trainerCommand: S.TRAINER_COMMAND,
  rolloutCommand: S.ROLLOUT_COMMAND,
  hybridCommand: S.HYBRID_COMMAND,
  integration: S.INTEGRATION,
  frameworkAttachedSeconds: S.FRAMEWORK_ATTACHED,
  gpuSampleSeconds: S.GPU_SAMPLE,
  dcgmUrl: S.DCGM_URL,
  gpuSource: S.GPU_SOURCE,
  stopGraceSeconds: S.STOP_GRACE,
  commandClockSkewSeconds: S.COMMAND_CLOCK_SKEW,
  advertiseHost: S.ADVERTISE_HOST,
  trainerWorldSize: S.TRAINER_WORLD_SIZE,
  weightsBindHost: S.WEIGHTS_BIND_HOST,
  weightsPort: S.WEIGHTS_PORT,
  weightsAdvertiseHost: S.WEIGHTS_ADVERTISE_HOST,
  weightsShmDir: S.WEIGHTS_SHM_DIR,
  weightsChunkMib: S.WEIGHTS_CHUNK_MIB,
  weightsMaxMibPerSecond: S.WEIGHTS_MAX_MIB_PER_SECOND,
  weightsGetsInFlight: S.WEIGHTS_GETS_IN_FLIGHT,
  weightsOpTimeoutSeconds: S.WEIGHTS_OP_TIMEOUT,
  weightsCatalogWaitSeconds: S.WEIGHTS_CATALOG_WAIT,
  weightsCudaDevice: S.WEIGHTS_CUDA_DEVICE,
  requestManagerUrl: S.REQUEST_MANAGER_URL,
  requestManagerToken: S.REQUEST_MANAGER_TOKEN,
  rendezvousPort: S.RENDEZVOUS_PORT,
  engineLoadDeadlineSeconds: S.ENGINE_LOAD_DEADLINE,
  leaseSeconds: S.AGENT_LEASE,
  inferenceUrl: S.INFERENCE_URL,
  apiSocket: S.AGENT_SOCKET,
  engines: S.ENGINES,
  notices: S.AGENT_NOTICES,
  noticePollSeconds: S.AGENT_NOTICE_POLL,
  terminationGraceSeconds: S.AGENT_TERMINATION_GRACE,
  azureVmName: S.AGENT_AZURE_VM_NAME,
  engineWeights: S.ENGINE_WEIGHTS,
} satisfies Record<string, Setting<unknown>>;

type Read<T extends Record<string, Setting<unknown>>> = { [K in keyof T]: ReturnType<T[K]['read']> };

/**
 * Reads every setting, gathering each bad value as `NAME: form, got 'value'` in `problems`, so that
 * the agent names all of them at once; the values are used only when `problems` stays empty.
 */
function readAll<T extends Record<string, Setting<unknown>>>(settings: T, env: Env, problems: string[]): Read<T> {
  const values: Record<string, unknown> = {};
  for (const [key, setting] of Object.entries(settings)) {
    try {
      values[key] = setting.read(env);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push(`${err.variable}: ${err.accepted}, got '${err.got}'`);
    }
  }
  return values as Read<T>;
}

export function agentConfigFromEnv(env: NodeJS.ProcessEnv): AgentConfig {
  const problems: string[] = [];
  const e = readAll(SETTINGS, env, problems);
  const required = <T>(value: T | undefined, name: string, why: string): T => {
    if (value === undefined && !problems.some((p) => p.startsWith(`${name}:`))) problems.push(`${name}: ${why}`);
    return value as T;
  };
  const jobId = required(e.jobId, 'ROBUSTRL_JOB_ID', 'required: the job this machine works for');
  const machineId = required(e.machineId, 'ROBUSTRL_MACHINE_ID', "required: this machine's id (the host name, or the pod name on Kubernetes)");
  const role = required(e.role, 'ROBUSTRL_ROLE', 'required, one of trainer, rollout, hybrid');
  if (problems.length) throw new Error(`agent configuration is invalid: ${problems.join('; ')}`);
  // ROBUSTRL_ROLE_COMMAND is the command of the machine's starting role; per-role commands let a
  // rollout machine start a trainer process when it is promoted to warm standby (paper §5.1.3).
  const roleCommands: Partial<Record<Role, string>> = {
    trainer: e.trainerCommand,
    rollout: e.rolloutCommand,
    hybrid: e.hybridCommand,
  };
  if (e.roleCommand) roleCommands[role] ??= e.roleCommand;
  const commands = [
    [S.ROLE_COMMAND, e.roleCommand],
    [S.TRAINER_COMMAND, e.trainerCommand],
    [S.ROLLOUT_COMMAND, e.rolloutCommand],
    [S.HYBRID_COMMAND, e.hybridCommand],
  ] as const;
  const given = commands.filter(([, value]) => value !== undefined).map(([setting]) => setting.info.name);
  if (e.integration === 'cooperate' && given.length)
    throw new Error(
      `agent configuration is invalid: ${given.join(', ')}: not with ROBUSTRL_INTEGRATION=cooperate, where the framework starts its own processes`,
    );
  let engines: EngineEndpoint[];
  let noticeSources: NoticeSource[];
  try {
    engines = enginesFromEnv(machineId, env);
    noticeSources = parseNoticeSources(e.notices ?? '');
  } catch (err) {
    throw new Error(`agent configuration is invalid: ${(err as Error).message}`);
  }
  return {
    jobId,
    machineId,
    role,
    zone: e.zone,
    hardwareClass: e.hardwareClass,
    gpus: e.gpus,
    dpRank: e.dpRank ?? null,
    inferenceUrl: e.inferenceUrl,
    engines,
    engineWeights: e.engineWeights,
    engineLoadDeadlineMs: Math.round(e.engineLoadDeadlineSeconds * 1000),
    leaseMs: Math.round(e.leaseSeconds * 1000),
    requestManagerUrl: e.requestManagerUrl,
    requestManagerToken: e.requestManagerToken,
    rendezvousPort: e.rendezvousPort,
    hostAddress: e.advertiseHost,
    trainerWorldSize: e.trainerWorldSize ?? null,
    apiPort: e.apiPort,
    apiSocket: e.apiSocket,
    apiToken: roleApiToken(env),
    roleCommands,
    integration: e.integration,
    frameworkAttachedMs: Math.round(e.frameworkAttachedSeconds * 1000),
    gpuSampleSeconds: e.gpuSampleSeconds,
    dcgmUrl: e.dcgmUrl,
    preferredGpuSource: e.gpuSource,
    stopGraceMs: Math.round(e.stopGraceSeconds * 1000),
    commandClockSkewMs: Math.round(e.commandClockSkewSeconds * 1000),
    machineKey: machineKeyFromEnv(env),
    roleCertificate: roleCertificateFromEnv(env, machineId, role),
    notices: {
      sources: noticeSources,
      pollMs: Math.round(e.noticePollSeconds * 1000),
      vmName: e.azureVmName ?? hostname(),
    },
    terminationGraceMs: Math.round(e.terminationGraceSeconds * 1000),
    weights: {
      bindHost: e.weightsBindHost ?? null,
      port: e.weightsPort,
      advertiseHost: e.weightsAdvertiseHost ?? e.advertiseHost,
      shmDir: e.weightsShmDir,
      chunkBytes: Math.round(e.weightsChunkMib * MiB),
      maxBytesPerSecond: Math.round(e.weightsMaxMibPerSecond * MiB),
      getsInFlight: e.weightsGetsInFlight,
      opTimeoutMs: Math.round(e.weightsOpTimeoutSeconds * 1000),
      catalogWaitMs: Math.round(e.weightsCatalogWaitSeconds * 1000),
      cudaDevice: e.weightsCudaDevice,
    },
  };
}

/** A fresh token for the role process where the agent's API takes tokens (any scope set), else none: an open API needs none. */
function roleApiToken(env: NodeJS.ProcessEnv): string | undefined {
  return httpTokensGiven(env, 'ROBUSTRL_HTTP') ? randomBytes(24).toString('base64url') : undefined;
}

/** The settings the agent's API is served with: its own, and the role process's token among the caller tokens. */
export function agentApiEnv(env: NodeJS.ProcessEnv, apiToken: string | undefined): NodeJS.ProcessEnv {
  if (!apiToken) return env;
  return { ...env, ROBUSTRL_HTTP_TOKENS: [env.ROBUSTRL_HTTP_TOKENS?.trim(), apiToken].filter(Boolean).join(',') };
}
