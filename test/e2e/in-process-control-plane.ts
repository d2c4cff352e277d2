import { MessageBus, Subscription } from '@robustrl/bus';
import { createMessage, DataOf, RobustrlMessage, Topics } from '@robustrl/contracts';
import { ControllerModule } from '@robustrl/controller';
import { DetectorModule } from '@robustrl/detector';
import type { Orchestrator } from '@robustrl/orchestrator';
import { MESSAGE_BUS, RunningService, runService } from '@robustrl/service-kit';

/** The detector and the controller in this process, on the real broker and database, and what they and the machines published. */
export interface InProcessControlPlane {
  service: RunningService;
  bus: MessageBus;
  /** Every message of every topic, as observed. */
  seen: RobustrlMessage[];
  stop(): Promise<void>;
}

/**
 * The control plane an end-to-end test of one recovery path needs (the detector, and the controller with
 * `orchestrator` carrying out its machine commands), with an observer reading every topic from the start.
 */
export async function startInProcessControlPlane(options: {
  name: string;
  brokers: string[];
  topicPrefix: string;
  databaseUrl: string;
  orchestrator: Orchestrator;
}): Promise<InProcessControlPlane> {
  const service = await runService(
    {
      serviceName: options.name,
      bus: { adapter: 'kafka', brokers: options.brokers, clientId: options.name, topicPrefix: options.topicPrefix },
      store: { kind: 'postgres', url: options.databaseUrl },
      httpPort: 0,
    },
    [DetectorModule, ControllerModule.withOrchestrator(options.orchestrator)],
    { logLevels: ['error'] },
  );
  const bus = service.app.get<MessageBus>(MESSAGE_BUS);
  const seen: RobustrlMessage[] = [];
  const observer: Subscription = await bus.subscribe({
    groupId: `${options.name}-observer`,
    topics: Object.values(Topics),
    handler: async (d) => void seen.push(d.message),
  });
  return {
    service,
    bus,
    seen,
    stop: async () => {
      await observer.close();
      await service.stop();
    },
  };
}

/** A semi-synchronous job of `trainers` and `rollouts` machines starting now, with the detection windows given. */
export function jobStarted(jobId: string, machines: { trainers: number; rollouts: number }, detection: DataOf<'JobStarted'>['detection']): RobustrlMessage {
  return createMessage(
    'JobStarted',
    { mode: 'semi-sync', resumedFromStep: null, trainerMachines: machines.trainers, rolloutMachines: machines.rollouts, detection },
    { jobId, source: 'e2e', occurredAt: new Date().toISOString() },
  ) as RobustrlMessage;
}
