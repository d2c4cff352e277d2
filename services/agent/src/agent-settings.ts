import { isIPv4 } from 'node:net';
import { custom, int, number, oneOf, seconds, text, url } from '@robustrl/config';
import { Role } from '@robustrl/contracts';
import { DEFAULT_AGENT_LEASE_SECONDS } from './broker-lease';

/**
 * What the agent reads from its environment (docs/operators/configuration-reference.md), read by
 * agentConfigFromEnv: the machine's identity, its role process, GPU sampling, the weight plane (paper §5.2.1),
 * its engines and the notices that it is about to go. Rules between variables stay in agent-config.ts.
 */
const owner = 'agent';

// The machine's identity; the first three are required (agentConfigFromEnv names the missing ones).
export const JOB_ID = text('ROBUSTRL_JOB_ID', { owner, meaning: 'the job this machine works for', default: undefined, defaultText: 'required' });
export const MACHINE_ID = text('ROBUSTRL_MACHINE_ID', {
  owner,
  meaning: "this machine's id: the host name, or the pod name on Kubernetes",
  default: undefined,
  defaultText: 'required',
});
export const ROLE = oneOf('ROBUSTRL_ROLE', Role.options, { owner, meaning: "the machine's starting role", default: undefined, defaultText: 'required' });
export const ZONE = text('ROBUSTRL_ZONE', { owner, meaning: 'the failure zone the machine is in, registered with it', default: 'default' });
export const HARDWARE_CLASS = text('ROBUSTRL_HARDWARE_CLASS', {
  owner,
  meaning: "the machine's hardware class, registered with it (a replacement is asked for in the same class)",
  default: 'default',
});
export const GPUS = int('ROBUSTRL_GPUS', { owner, meaning: 'GPUs on the machine', default: 8, min: 1 });
export const DP_RANK = int('ROBUSTRL_DP_RANK', { owner, meaning: "the machine's data-parallel rank, registered with it", default: undefined, min: 0 });

// The role process and the framework (docs/integrators/integrate-your-job.md).
const command = (name: string, meaning: string) => text(name, { owner, meaning, default: undefined, defaultText: 'none: the framework runs on its own' });
export const ROLE_COMMAND = command('ROBUSTRL_ROLE_COMMAND', "shell command of the role process of the machine's starting role");
export const TRAINER_COMMAND = command(
  'ROBUSTRL_TRAINER_COMMAND',
  'shell command of the trainer role process (a rollout machine promoted to warm standby starts it, paper §5.1.3)',
);
export const ROLLOUT_COMMAND = command('ROBUSTRL_ROLLOUT_COMMAND', 'shell command of the rollout role process');
export const HYBRID_COMMAND = command('ROBUSTRL_HYBRID_COMMAND', 'shell command of the hybrid role process');
export const INTEGRATION = oneOf('ROBUSTRL_INTEGRATION', ['supervise', 'cooperate'], {
  owner,
  meaning: '`supervise`: the agent runs and restarts the role command; `cooperate`: the framework owns its processes and follows `GET /v1/commands`',
  default: 'supervise',
});
export const FRAMEWORK_ATTACHED = seconds('ROBUSTRL_FRAMEWORK_ATTACHED_SECONDS', {
  owner,
  meaning: 'cooperate mode: how long after its last poll the framework still counts as following commands (the agent answers probes for it)',
  default: 45,
});
export const STOP_GRACE = seconds('ROBUSTRL_STOP_GRACE_SECONDS', {
  owner,
  meaning: 'SIGTERM → SIGKILL grace when stopping the role process',
  default: 10,
  zero: 'SIGKILL at once',
});
export const COMMAND_CLOCK_SKEW = seconds('ROBUSTRL_COMMAND_CLOCK_SKEW_SECONDS', {
  owner,
  meaning:
    "a command naming no incarnation that was issued longer than this before the agent started is a replay and ignored (commands the controller addresses name the agent's incarnation)",
  default: 5,
  zero: 'no tolerance',
});

// The agent's own API.
export const AGENT_PORT = int('ROBUSTRL_AGENT_PORT', {
  owner,
  meaning: 'port of the local HTTP API the framework talks to (bound to `ROBUSTRL_HTTP_HOST`, loopback by default)',
  default: 8086,
  min: 0,
  max: 65535,
});
export const AGENT_SOCKET = text('ROBUSTRL_AGENT_SOCKET', {
  owner,
  meaning: 'the same API on a Unix socket at this path too, for a framework in another container of the node',
  default: undefined,
  pattern: /^\/\S+$/,
  accepted: "the socket's absolute path, e.g. /run/robustrl/agent.sock",
});

// GPU activity.
export const GPU_SAMPLE = seconds('ROBUSTRL_GPU_SAMPLE_SECONDS', { owner, meaning: 'how often GPU activity is sampled', default: 10 });
export const DCGM_URL = custom('ROBUSTRL_DCGM_URL', {
  owner,
  meaning: "the DCGM exporter's metrics endpoint, the first GPU source tried",
  default: undefined,
  accepted: 'a URL',
  parse: (raw) => (URL.canParse(raw) ? raw : undefined),
});
export const GPU_SOURCE = oneOf('ROBUSTRL_GPU_SOURCE', ['dcgm', 'nvml', 'nvidia-smi', 'emulated', 'process-cpu'], {
  owner,
  meaning:
    "the GPU source: `nvml` reads tensor activity from NVML's GPM on Hopper and later, else utilization; `process-cpu` (no GPU: the role processes' CPU time stands in) only when named",
  default: undefined,
  defaultText: 'auto (dcgm → nvml → nvidia-smi → emulated)',
});

// Trainer groups.
export const ADVERTISE_HOST = text('ROBUSTRL_ADVERTISE_HOST', {
  owner,
  meaning:
    "the machine's address as other machines reach it (the pod IP): registered, a trainer group whose rank 0 is this machine meets there (`MASTER_ADDR`), and the weight server's default",
  default: '127.0.0.1',
});
export const TRAINER_WORLD_SIZE = int('ROBUSTRL_TRAINER_WORLD_SIZE', {
  owner,
  meaning: "a trainer's first launch waits for this many trainer machines to register and starts with its `RANK`, `WORLD_SIZE` and rank 0's `MASTER_ADDR`",
  default: undefined,
  defaultText: "unset: the first launch gets only the agent's own environment",
  min: 1,
});
export const RENDEZVOUS_PORT = int('ROBUSTRL_RENDEZVOUS_PORT', {
  owner,
  meaning: "the port a re-formed trainer group meets on at rank 0's host (`MASTER_PORT`), the same on every agent",
  default: 29500,
  min: 1,
  max: 65535,
});
export const AGENT_LEASE = seconds('ROBUSTRL_AGENT_LEASE_SECONDS', {
  owner,
  meaning:
    'a trainer or hybrid role with no broker contact for this long is stopped by its agent (fencing; keep it below the agent-silent window plus the probe timeout)',
  default: DEFAULT_AGENT_LEASE_SECONDS,
  zero: 'no lease',
});
export const REQUEST_MANAGER_URL = url('ROBUSTRL_REQUEST_MANAGER_URL', {
  owner,
  meaning: "the request manager's base URL, where a restarted trainer's kept batch is fetched from (`GET /v1/restart/batch`)",
  default: undefined,
  defaultText: 'none (503 with why)',
});
export const REQUEST_MANAGER_TOKEN = text('ROBUSTRL_REQUEST_MANAGER_TOKEN', {
  owner,
  meaning: "the request manager's bearer token, when its API asks for one",
  default: undefined,
});

// The UCX weight server and pull limits (paper §5.2.1).
export const WEIGHTS_BIND_HOST = custom('ROBUSTRL_WEIGHTS_BIND_HOST', {
  owner,
  meaning: 'the address the weight server binds (UCX listens on IPv4); may be 0.0.0.0 where `ROBUSTRL_WEIGHTS_ADVERTISE_HOST` names what others dial',
  default: undefined,
  defaultText: 'the advertised address (that interface only)',
  accepted: 'an IPv4 address',
  parse: (raw) => (isIPv4(raw) ? raw : undefined),
});
export const WEIGHTS_PORT = int('ROBUSTRL_WEIGHTS_PORT', { owner, meaning: "the weight server's port (0: any free port)", default: 13337, min: 0, max: 65535 });
export const WEIGHTS_ADVERTISE_HOST = text('ROBUSTRL_WEIGHTS_ADVERTISE_HOST', {
  owner,
  meaning: 'the address other machines dial for the weight server (the pod IP on a cluster; a host name is resolved to IPv4 at start)',
  default: undefined,
  defaultText: '`ROBUSTRL_ADVERTISE_HOST`',
});
export const WEIGHTS_SHM_DIR = text('ROBUSTRL_WEIGHTS_SHM_DIR', { owner, meaning: "the weight plane's shared-memory directory", default: '/dev/shm' });
export const WEIGHTS_CHUNK_MIB = number('ROBUSTRL_WEIGHTS_CHUNK_MIB', {
  owner,
  meaning: "MiB per GET (at least a sampled checksum's stride)",
  default: 8,
  above: 0,
});
export const WEIGHTS_MAX_MIB_PER_SECOND = number('ROBUSTRL_WEIGHTS_MAX_MIB_PER_SECOND', {
  owner,
  meaning: 'pull pacing in MiB per second, leaving bandwidth to training traffic (0: none)',
  default: 0,
  min: 0,
});
export const WEIGHTS_GETS_IN_FLIGHT = int('ROBUSTRL_WEIGHTS_GETS_IN_FLIGHT', {
  owner,
  meaning: 'GETs of one bucket outstanding at once: device memory moves at link speed only with several in flight',
  default: 8,
  min: 1,
  max: 256,
});
export const WEIGHTS_OP_TIMEOUT = seconds('ROBUSTRL_WEIGHTS_OP_TIMEOUT_SECONDS', { owner, meaning: 'the bound on one GET', default: 30 });
export const WEIGHTS_CATALOG_WAIT = seconds('ROBUSTRL_WEIGHTS_CATALOG_WAIT_SECONDS', {
  owner,
  meaning: "how long a pull waits for a relay's catalog",
  default: 10,
});
export const WEIGHTS_CUDA_DEVICE = custom('ROBUSTRL_WEIGHTS_CUDA_DEVICE', {
  owner,
  meaning:
    "the CUDA device whose context the weight plane's UCX worker is created with (device buckets): `auto` is device 0 where the module's UCX supports CUDA and the driver sees a device",
  default: 'auto' as const,
  accepted: "'auto', 'none' or a CUDA device ordinal",
  parse: (raw): number | 'auto' | 'none' | undefined => {
    if (raw === 'auto' || raw === 'none') return raw;
    const ordinal = Number(raw);
    return Number.isInteger(ordinal) && ordinal >= 0 ? ordinal : undefined;
  },
});

// The rollout machine's engines (docs/integrators/engines.md).
export const INFERENCE_URL = url('ROBUSTRL_INFERENCE_URL', {
  owner,
  meaning: "a rollout machine's engine base URL, as the router reaches it: registered, so the engine joins the router once the machine holds weights",
  default: undefined,
  defaultText: 'not registered',
});
export const ENGINES = text('ROBUSTRL_ENGINES', {
  owner,
  meaning: 'several engines on the machine, each routed as `<machine>/<name>` (not with `ROBUSTRL_INFERENCE_URL`)',
  default: undefined,
  defaultText: 'one engine or none',
  accepted: 'name=url, comma separated (at most 64)',
});
export const ENGINE_WEIGHTS = oneOf('ROBUSTRL_ENGINE_WEIGHTS', ['off', 'vllm'], {
  owner,
  meaning:
    "`vllm`: the agent loads each version it holds whole into its vLLM engine in place (pause, the worker extension's load, stamp the version, reset the prefix cache, resume) and stamps a fresh engine's starting model as version 0; `off`: the framework loads versions itself from `/v1/weights/latest`",
  default: 'off',
});
export const ENGINE_LOAD_DEADLINE = seconds('ROBUSTRL_ENGINE_LOAD_DEADLINE_SECONDS', {
  owner,
  meaning:
    "with `ROBUSTRL_ENGINE_WEIGHTS=vllm`: a version's load not finished within it is a `weight-load-stalled` fault of the rollout role, an engine not answering its agent within it an `engine-unresponsive` one",
  default: 120,
});

// Notices that the machine is about to go (notices/).
export const AGENT_NOTICES = text('ROBUSTRL_AGENT_NOTICES', {
  owner,
  meaning: "the cloud's notices that this machine is about to go, read from its metadata endpoint and each reported as `node-draining` with its deadline",
  default: undefined,
  accepted: 'format=url, comma separated (formats aws-spot, gce-preempted, gce-maintenance, azure)',
});
export const AGENT_NOTICE_POLL = seconds('ROBUSTRL_AGENT_NOTICE_POLL_SECONDS', { owner, meaning: 'how often the cloud notices are read', default: 5 });
export const AGENT_AZURE_VM_NAME = text('ROBUSTRL_AGENT_AZURE_VM_NAME', {
  owner,
  meaning: "this VM's name in Azure's scheduled events",
  default: undefined,
  defaultText: 'the host name',
});
export const AGENT_TERMINATION_GRACE = seconds('ROBUSTRL_AGENT_TERMINATION_GRACE_SECONDS', {
  owner,
  meaning:
    "the pod's termination grace period: a SIGTERM while the role runs is then reported as `node-draining` with that much time, and the role runs on while it is moved",
  default: 0,
  zero: 'SIGTERM stops at once',
});
