import { execFileSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { MessageBus } from '@robustrl/bus';
import { createMessage, RobustrlMessage } from '@robustrl/contracts';
import { ControllerModule } from '@robustrl/controller';
import { DetectorModule } from '@robustrl/detector';
import { LocalProcessSupervisor, MachineSpec } from '@robustrl/orchestrator';
import { MESSAGE_BUS, RunningService, runService } from '@robustrl/service-kit';
import { freePorts, PrivateInfra } from '@robustrl/harness';

/**
 * What the integration examples (`npm run example:torchrun`, `npm run example:ray`) share: the project's
 * Python environment, a Kafka broker and a PostgreSQL server of the run's own, agents in cooperate mode
 * launched by the local process supervisor, the detector and controller in this process, and the story
 * of a recovery told one line an event.
 */
export const REPO = resolve(__dirname, '..', '..', '..');
const AGENT = join(REPO, 'services', 'agent', 'dist', 'main.js');

export const say = (line: string) => process.stdout.write(`[example] ${line}\n`);

/** deploy/local/vllm.sh ensure (torch, Ray; a few minutes the first time), then the venv's python. */
export function projectPython(what: string): string {
  return projectPythonAndModel(what).python;
}

/** The same, and the GRPO example's base model (made locally by vllm.sh, examples/grpo). */
export function projectPythonAndModel(what: string): { python: string; model: string } {
  say(`${what}: deploy/local/vllm.sh ensure (the project’s Python environment; a few minutes the first time)`);
  execFileSync('bash', [join(REPO, 'deploy', 'local', 'vllm.sh'), 'ensure'], { stdio: ['ignore', 'ignore', 'inherit'] });
  const [python, model] = execFileSync('bash', [join(REPO, 'deploy', 'local', 'vllm.sh'), 'status'], { encoding: 'utf8' })
    .trim()
    .split('\n');
  return { python: python!, model: model! };
}

type ServiceModules = Parameters<typeof runService>[1];

export interface ExamplePlane {
  infra: PrivateInfra;
  supervisor: LocalProcessSupervisor;
  service: RunningService;
  bus: MessageBus;
  close(): Promise<void>;
}

/**
 * The broker and database of the run's own, agents in cooperate mode (`ROBUSTRL_TRAINER_WORLD_SIZE` 2),
 * and the services of `modules` in this process: by default the detector and controller.
 */
export async function startExamplePlane(
  name: string,
  agentEnv: Record<string, string> | ((m: MachineSpec) => Record<string, string>) = {},
  modules: (supervisor: LocalProcessSupervisor) => ServiceModules = (supervisor) => [DetectorModule, ControllerModule.withOrchestrator(supervisor)],
): Promise<ExamplePlane> {
  const infra = await PrivateInfra.create();
  say(`a Kafka broker and a PostgreSQL server of this run's own (${infra.dir})`);
  infra.startKafka();
  infra.startPostgres();
  const [rendezvousPort] = await freePorts(1);
  const supervisor = new LocalProcessSupervisor({
    stopGraceMs: 5_000,
    output: () => undefined,
    launch: (m) => ({
      command: process.execPath,
      args: [AGENT],
      env: {
        KAFKA_BROKERS: infra.brokers.join(','),
        ROBUSTRL_JOB_ID: m.jobId,
        ROBUSTRL_MACHINE_ID: m.machineId,
        ROBUSTRL_ROLE: m.role,
        ROBUSTRL_AGENT_PORT: '0',
        ROBUSTRL_INTEGRATION: 'cooperate',
        ROBUSTRL_TRAINER_WORLD_SIZE: '2',
        ROBUSTRL_RENDEZVOUS_PORT: String(rendezvousPort),
        ROBUSTRL_GPU_SOURCE: 'emulated',
        ROBUSTRL_GPU_SAMPLE_SECONDS: '1',
        ROBUSTRL_WEIGHTS_PORT: '0',
        ...(typeof agentEnv === 'function' ? agentEnv(m) : agentEnv),
      },
    }),
  });
  const service = await runService(
    {
      serviceName: name,
      bus: { adapter: 'kafka', brokers: infra.brokers, clientId: name, topicPrefix: '' },
      store: { kind: 'postgres', url: infra.databaseUrl },
      httpPort: 0,
    },
    modules(supervisor),
    { logLevels: ['error'] },
  );
  const bus = service.app.get<MessageBus>(MESSAGE_BUS);
  return {
    infra,
    supervisor,
    service,
    bus,
    close: async () => {
      await supervisor.close();
      await service.stop();
      infra.destroy();
    },
  };
}

/** The job announced: two trainer machines, `rollouts` rollout machines, the examples' detection windows. */
export function announceJob(bus: MessageBus, jobId: string, rollouts: number): Promise<void> {
  return bus.publish(
    createMessage(
      'JobStarted',
      {
        mode: 'semi-sync',
        resumedFromStep: null,
        trainerMachines: 2,
        rolloutMachines: rollouts,
        detection: { trainerIdleWindowSeconds: 60, rolloutSilentWindowSeconds: 10, probeTimeoutSeconds: 5 },
      },
      { jobId, source: 'example', occurredAt: new Date().toISOString() },
    ),
  );
}

/** The events a user follows, one line each; the rest (samples, heartbeats) stay quiet. `executor`: who carries commands out. */
export function story(m: RobustrlMessage, executor: string): string | null {
  switch (m.type) {
    case 'TrainingStepCompleted':
      return m.source === 'agent/trainer-0' ? `step ${m.data.step} completed` : null;
    case 'AgentFaultSignalled':
      return `${m.data.machineId} reports ${m.data.signal}: ${m.data.detail}`;
    case 'FaultConfirmed':
      return `detector: ${m.data.machineId} confirmed faulty by ${m.data.rule}`;
    case 'RecoveryDecided':
      return `controller: ${m.data.action} (rule ${m.data.rule})`;
    case 'RestartTrainerGroup':
      return `controller: restart the trainer group [${m.data.machines.join(', ')}] at step ${m.data.step} from checkpoint ${m.data.checkpointStep}`;
    case 'RestartRolloutEngine':
      return `controller: restart ${m.data.machineId}'s engine in place`;
    case 'RecoveryCommandSucceeded':
      return `${m.data.machineId}: ${executor} carried the command out (${m.data.durationMs} ms)`;
    case 'RecoveryCompleted':
      return `recovery ${m.data.outcome}: detect ${m.data.stagesMs.detect} ms, decide ${m.data.stagesMs.decide} ms, restart ${m.data.stagesMs.restart} ms`;
    case 'RestartTask':
      return 'controller: the whole task restarts';
    default:
      return null;
  }
}

/** Runs an example's main and exits with its code (1 and the error when it throws). */
export function runExample(main: (stopped: AbortSignal) => Promise<number>): void {
  // SIGTERM or Ctrl-C (a test's timeout, an operator) aborts the run: the example stops waiting and
  // goes through its own clean-up (its driver, services, broker and database) instead of leaving them.
  const stop = new AbortController();
  const abort = (signal: NodeJS.Signals) => {
    process.stderr.write(`${signal}: stopping the example and what it started\n`);
    stop.abort(new Error(`stopped by ${signal}`));
  };
  process.once('SIGTERM', abort);
  process.once('SIGINT', abort);
  main(stop.signal).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`example failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
