import { randomUUID } from 'node:crypto';
import { Server } from 'node:http';
import { join, resolve } from 'node:path';
import { BusLogger, KafkaBus, Subscription } from '@robustrl/bus';
import { RobustrlMessage, Topics } from '@robustrl/contracts';
import { LocalProcessSupervisor, MachineSpec, serveOrchestrator } from '@robustrl/orchestrator';
import type { NetnsHosts } from '../hosts/netns-hosts';
import { serviceEnvs } from './campaign-env';
import { campaignTimings, OBSERVED } from './campaign-settings';
import { CONTROL_PLANE_SERVICES, ControlPlaneService } from './fault-schedule';
import { LatencyProxy } from './latency-proxy';
import { PartitionedOrchestrator, Partitions } from './partition-faults';
import { freePorts, PrivateInfra, ServiceProcess } from './private-infra';
import { awaitServicesReady } from './services-ready';

const AGENT_MAIN = join(resolve(__dirname, '..', '..', '..', '..'), 'services', 'agent', 'dist', 'main.js');
const quiet: BusLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** The ports of a campaign's control plane, the router, the trainers' rendezvous, and a pool for engines. */
export interface PlanePorts {
  http: Record<ControlPlaneService, number>;
  router: number;
  rendezvous: number;
}

/** A campaign's control plane running: what the run acts on and what its teardown stops. */
export interface CampaignPlane {
  ports: PlanePorts;
  /** Free ports for engines, taken one per machine. */
  enginePorts: number[];
  bus: KafkaBus;
  supervisor: LocalProcessSupervisor;
  orchestratorServer: Server;
  services: Map<ControlPlaneService, ServiceProcess>;
  /** Between the services and PostgreSQL (degraded-faults.ts). */
  postgresProxy: LatencyProxy;
  observer: Subscription;
}

export interface PlaneSite {
  infra: PrivateInfra;
  hosts: NetnsHosts | null;
  partitions: Partitions;
  logDir: string;
  jobId: string;
  timings: ReturnType<typeof campaignTimings>;
  policy: 'role-based' | 'task-restart';
  progress: (line: string) => void;
  /** An agent's environment, given what every process of the run gets (campaign-env.ts). */
  agentEnv: (m: MachineSpec & { jobId: string }, common: NodeJS.ProcessEnv) => Record<string, string>;
  /** A line a machine's processes wrote. */
  machineLine: (machineId: string, line: string) => void;
  /** Every message of the observed topics, from the beginning. */
  observe: (message: RobustrlMessage) => void;
}

/**
 * Brings a campaign's control plane up (docs/contributors/chaos.md "The whole system under faults"): the run's broker and
 * PostgreSQL (reached through a relay the slow-postgres fault can slow), the five services as processes,
 * the machine host (agents as processes) served to the controller as its orchestrator over HTTP, and an
 * observer reading every topic the checks need. Each part is put `into` as it starts, so that a
 * bring-up that fails half-way leaves its teardown what to stop.
 */
export async function startCampaignPlane(site: PlaneSite, into: Partial<CampaignPlane>): Promise<CampaignPlane> {
  const { infra, hosts } = site;
  site.progress(`private broker and PostgreSQL in ${infra.dir}`);
  infra.startKafka();
  infra.startPostgres();
  const database = new URL(infra.databaseUrl);
  const postgresProxy = (into.postgresProxy = new LatencyProxy({ host: database.hostname, port: Number(database.port || 5432) }));
  database.hostname = '127.0.0.1';
  database.port = String(await postgresProxy.listen());
  // Engine ports for a shared host, one per machine ever launched (replacements included); on
  // network-namespace hosts every engine uses the first.
  const [detector, controller, requestManager, rolloutManager, weightRegistry, router, rendezvous, ...enginePorts] = await freePorts(7 + 120);
  const ports: PlanePorts = (into.ports = {
    http: { detector, controller, 'request-manager': requestManager, 'rollout-manager': rolloutManager, 'weight-registry': weightRegistry },
    router,
    rendezvous,
  });
  into.enginePorts = enginePorts;
  const topicPrefix = `syschaos-${randomUUID().slice(0, 8)}.`;
  const common: NodeJS.ProcessEnv = {
    KAFKA_BROKERS: infra.brokers.join(','),
    DATABASE_URL: database.toString(),
    ROBUSTRL_TOPIC_PREFIX: topicPrefix,
    OTEL_SDK_DISABLED: 'true',
    ROBUSTRL_ORCHESTRATOR: 'none',
    NO_COLOR: '1',
  };
  const bus = (into.bus = new KafkaBus({ brokers: infra.brokers, clientId: 'system-chaos', topicPrefix, logger: quiet }));
  await bus.ensureTopics();

  const supervisor = (into.supervisor = new LocalProcessSupervisor({
    stopGraceMs: 2_000,
    output: site.machineLine,
    launch: (m) => {
      const env = site.agentEnv(m, common);
      return hosts
        ? { ...hosts.wrap(hosts.add(m.machineId).name, process.execPath, [AGENT_MAIN]), env }
        : { command: process.execPath, args: [AGENT_MAIN], env };
    },
  }));
  const orchestrator = new PartitionedOrchestrator(supervisor, site.partitions, (line) => site.progress(`  (${line})`));
  const served = await serveOrchestrator(orchestrator, { port: 0, host: '127.0.0.1' });
  into.orchestratorServer = served.server;

  const own = serviceEnvs({
    timings: site.timings,
    orchestratorUrl: served.url,
    policy: site.policy,
    onHosts: hosts !== null,
    routerPort: ports.router,
    jobId: site.jobId,
    requestManagerUrl: `http://127.0.0.1:${ports.http['request-manager']}`,
  });
  // On namespace hosts the services answer on the bridge too (machines call the request manager). The
  // bridge is the run's own, reachable from its namespaces only: its APIs ask for no token there.
  const bind = hosts ? { ROBUSTRL_HTTP_HOST: '0.0.0.0', ROBUSTRL_HTTP_AUTH: 'none' } : {};
  const services = (into.services ??= new Map<ControlPlaneService, ServiceProcess>());
  for (const name of CONTROL_PLANE_SERVICES) services.set(name, new ServiceProcess(name, ports.http[name], { ...common, ...bind, ...own[name] }, site.logDir));
  for (const s of services.values()) s.start();
  await awaitServicesReady([...services.values()], { timeoutMs: 180_000, progress: site.progress });
  site.progress('detector, controller, request manager, rollout manager (router), weight registry: ready');

  const observer = (into.observer = await bus.subscribe({
    groupId: `system-chaos-observer-${randomUUID()}`,
    topics: [
      Topics.membership,
      Topics.verdicts,
      Topics.control,
      Topics.replies,
      Topics.training,
      Topics.trajectories,
      Topics.weights,
      Topics.telemetry,
      Topics.heartbeat,
    ],
    types: OBSERVED,
    fromBeginning: true,
    handler: async ({ message }) => site.observe(message),
  }));
  return { ports, enginePorts, bus, supervisor, orchestratorServer: served.server, services, postgresProxy, observer };
}

/** Each service's readiness answer, in CONTROL_PLANE_SERVICES order. */
export function planeReadiness(services: ReadonlyMap<ControlPlaneService, ServiceProcess>): Promise<number[]> {
  return Promise.all(CONTROL_PLANE_SERVICES.map((name) => services.get(name)!.readiness()));
}

/** Stops whatever of a plane started, in the reverse order of its bring-up (machines first). */
export async function stopCampaignPlane(plane: Partial<CampaignPlane>): Promise<void> {
  await plane.supervisor?.close().catch(() => undefined);
  await new Promise<void>((done) => (plane.orchestratorServer ? plane.orchestratorServer.close(() => done()) : done()));
  await Promise.all([...(plane.services?.values() ?? [])].map((s) => s.terminate().catch(() => undefined)));
  await plane.observer?.close().catch(() => undefined);
  await plane.bus?.close().catch(() => undefined);
  await plane.postgresProxy?.close().catch(() => undefined);
}
