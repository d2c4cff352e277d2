import { Inject, Logger, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { MessageBus, Subscription } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { EVENT_STORE, EventRecorder, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { TRAJECTORY_STORE_MIGRATIONS, TrajectoryStore, TurnWriter } from '@robustrl/trajectory-store';
import { retentionStepsFromEnv } from './retention';
import { TrajectoriesController } from './trajectories.controller';

/**
 * Request manager: the trajectory store, every tool iteration preserved (paper §3, §5.2.2).
 *
 * - Write path: the HTTP API (TrajectoriesController), turn appends batched by the TurnWriter. The store
 *   publishes TrajectoryTurnAppended / TrajectoryStatusChanged after each commit (the rollout manager
 *   tracks owners from them).
 * - Retention: on TrainingStepCompleted, completed batches older than the window are pruned (retention.ts).
 * - Tables: the trajectory store's tables are this service's own (`migrations/`). The store it shares
 *   with the other modules of the process creates only its core tables; this module runs its own
 *   migrations on it before the trajectory store is built, so any process that imports the module
 *   (its own main, the embedded main job, tests) has them.
 * - Recorder: the trajectories topic is still recorded in the event log, except TrajectoryTurnAppended:
 *   those are this service's own notifications of rows it already stores, at thousands per second;
 *   recording them again would double the write load of the hottest path for no new information.
 */
export const REQUEST_MANAGER_INPUTS = [Topics.trajectories, Topics.training] as const;

@Module({
  controllers: [TrajectoriesController],
  providers: [
    {
      provide: TrajectoryStore,
      useFactory: async (store: EventStore, bus: MessageBus) => {
        await store.migrate(TRAJECTORY_STORE_MIGRATIONS);
        return new TrajectoryStore(store, bus);
      },
      inject: [EVENT_STORE, MESSAGE_BUS],
    },
    { provide: TurnWriter, useFactory: (trajectories: TrajectoryStore) => new TurnWriter(trajectories), inject: [TrajectoryStore] },
  ],
  exports: [TrajectoryStore, TurnWriter],
})
export class RequestManagerModule implements OnApplicationBootstrap, OnModuleDestroy {
  readonly recorder: EventRecorder;
  private readonly logger = new Logger('request-manager');
  private readonly retentionSteps = retentionStepsFromEnv();
  private retention?: Subscription;

  constructor(
    @Inject(MESSAGE_BUS) private readonly bus: MessageBus,
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(TrajectoryStore) readonly trajectories: TrajectoryStore,
    @Inject(TurnWriter) readonly turnWriter: TurnWriter,
  ) {
    this.recorder = new EventRecorder(bus, store, {
      consumer: 'request-manager',
      topics: [Topics.trajectories],
      types: ['TrajectoryStatusChanged', 'TrajectoriesReassigned', 'TrajectoryRestartedFromPrompt'],
    });
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.recorder.start();
    const keepSteps = this.retentionSteps;
    if (keepSteps === null) {
      this.logger.log('trajectory retention off: completed batches are kept');
      return;
    }
    this.retention = await this.bus.subscribe({
      groupId: 'robustrl-request-manager-retention',
      topics: [Topics.training],
      types: ['TrainingStepCompleted'],
      handler: async ({ message }) => {
        if (message.type !== 'TrainingStepCompleted') return;
        const pruned = await this.trajectories.prune({ jobId: message.jobId, keepSteps, currentStep: message.data.step });
        if (pruned.trajectories > 0) {
          this.logger.log(
            `job ${message.jobId} step ${message.data.step}: pruned ${pruned.trajectories} trajectories (${pruned.turns} turns) of steps <= ${message.data.step - keepSteps}`,
          );
        }
      },
    });
  }

  /** Turns already accepted are written before the bus and the store close (core module, after this). */
  async onModuleDestroy(): Promise<void> {
    await this.turnWriter.close();
    await this.trajectories.drainPublishes();
    await this.retention?.close();
    await this.recorder.stop();
  }
}
