import type { MachineSpec } from '@robustrl/orchestrator';
import type { campaignTimings } from './campaign-settings';
import type { ControlPlaneService } from './fault-schedule';

type Timings = ReturnType<typeof campaignTimings>;

/** What a campaign's machine needs to know of its run (system-chaos.ts builds it). */
export interface AgentSite {
  /** Its weight server's shared-memory folder. */
  shmDir: string;
  /** The machine's own address. */
  hostAddress: string;
  /** On a network namespace of its own (it does not reach the services' PostgreSQL). */
  onHostOfItsOwn: boolean;
  timings: Timings;
  requestManagerUrl: string;
  engineUrl: string;
  rendezvousPort: number;
  trainers: number;
  /** The clock preload (skewed-clock.ts) and this machine's offset file, when the build has one. */
  clock: { preload: string; file: string } | null;
  /** The pod's termination grace period: SIGTERM is then a notice (planned-faults.ts); 0 stops at once. */
  terminationGraceSeconds: number;
}

/**
 * An agent's environment in the campaign: the product's settings as a user gives them, the campaign's
 * time scale applied to its lease, and the machine's place in the run (docs/contributors/chaos.md "The whole system under
 * faults"). `common` is what every process of the run gets (broker, topics, PostgreSQL).
 */
export function agentEnvOf(m: MachineSpec & { jobId: string }, common: NodeJS.ProcessEnv, site: AgentSite): Record<string, string> {
  // A machine on a host of its own does not reach the control plane's PostgreSQL (nor does one on a
  // cluster): its agent keeps what it stores in process, as the chart's agents do.
  const { DATABASE_URL, ...reachable } = common as Record<string, string>;
  return {
    // Empty, not absent: the supervisor starts agents with this process's environment underneath.
    ...(site.onHostOfItsOwn ? { ...reachable, DATABASE_URL: '' } : { ...reachable, DATABASE_URL }),
    ROBUSTRL_JOB_ID: m.jobId,
    ROBUSTRL_MACHINE_ID: m.machineId,
    ROBUSTRL_ROLE: m.role,
    ROBUSTRL_ZONE: m.zone,
    ROBUSTRL_HARDWARE_CLASS: m.hardwareClass,
    ROBUSTRL_GPUS: '1',
    ROBUSTRL_AGENT_PORT: '0',
    ROBUSTRL_GPU_SAMPLE_SECONDS: '1',
    ROBUSTRL_STOP_GRACE_SECONDS: '1',
    ROBUSTRL_AGENT_TERMINATION_GRACE_SECONDS: String(site.terminationGraceSeconds),
    ROBUSTRL_AGENT_LEASE_SECONDS: String(site.timings.leaseSeconds),
    ROBUSTRL_WEIGHTS_PORT: '0',
    ROBUSTRL_WEIGHTS_SHM_DIR: site.shmDir,
    ROBUSTRL_REQUEST_MANAGER_URL: site.requestManagerUrl,
    ROBUSTRL_RENDEZVOUS_PORT: String(site.rendezvousPort),
    // The machine's own address: the trainer group meets at rank 0's, weights are served from it.
    ROBUSTRL_ADVERTISE_HOST: site.hostAddress,
    // Every launch, first or restart, takes its rank, world size and rendezvous from the agent.
    ROBUSTRL_TRAINER_WORLD_SIZE: String(site.trainers),
    ROBUSTRL_INFERENCE_URL: site.engineUrl,
    // Between namespaces UCX goes over TCP, across the veth pairs (no shared-memory shortcut).
    ...(site.onHostOfItsOwn ? { UCX_TLS: 'tcp' } : {}),
    PYTHONUNBUFFERED: '1',
    // The agent's wall clock, which the clock-skew fault steps (skewed-clock.ts).
    ...(site.clock
      ? { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${site.clock.preload}`.trim(), ROBUSTRL_CHAOS_CLOCK_FILE: site.clock.file }
      : {}),
  };
}

/** What the campaign's control plane is told beyond `common`: each service's own settings. */
export interface ServiceSite {
  timings: Timings;
  orchestratorUrl: string;
  policy: 'role-based' | 'task-restart';
  /** Machines are network namespaces: the router answers on every interface, without a token on the run's bridge. */
  onHosts: boolean;
  routerPort: number;
  jobId: string;
  requestManagerUrl: string;
}

export function serviceEnvs(site: ServiceSite): Record<ControlPlaneService, NodeJS.ProcessEnv> {
  return {
    detector: { ROBUSTRL_DETECTOR_INPUT_LAG_TOLERANCE_SECONDS: String(site.timings.inputLagToleranceSeconds) },
    controller: {
      ROBUSTRL_ORCHESTRATOR: 'http',
      ROBUSTRL_ORCHESTRATOR_URL: site.orchestratorUrl,
      // The product's timeout over the campaign's time scale: no setting of the campaign's own hides a stall.
      ROBUSTRL_COMMAND_TIMEOUT_SECONDS: String(site.timings.commandTimeoutSeconds),
      ROBUSTRL_RECOVERY_POLICY: site.policy,
    },
    'request-manager': { ROBUSTRL_TRAJECTORY_RETENTION_STEPS: '1000000' },
    'rollout-manager': {
      ROBUSTRL_ROUTER: 'on',
      ROBUSTRL_ROUTER_HOST: site.onHosts ? '0.0.0.0' : '127.0.0.1',
      ...(site.onHosts ? { ROBUSTRL_ROUTER_AUTH: 'none' } : {}),
      ROBUSTRL_ROUTER_PORT: String(site.routerPort),
      ROBUSTRL_JOB_ID: site.jobId,
      ROBUSTRL_REQUEST_MANAGER_URL: site.requestManagerUrl,
      ROBUSTRL_MAX_STALENESS: '1',
    },
    'weight-registry': {},
  };
}
