import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { EVENT_STORE, EventRecorder, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';

/**
 * Rollout manager: rollout liveness, throughput, reassignment of in-flight trajectories (paper §3, §5.2.2).
 *
 * Today a shell: it consumes its input topics and records them once in the event log. Its rules
 * arrive as pure deciders in their own files next to this one.
 */
export const ROLLOUT_MANAGER_INPUTS = [Topics.membership, Topics.telemetry, Topics.trajectories, Topics.verdicts] as const;

@Module({})
export class RolloutManagerModule implements OnApplicationBootstrap, OnModuleDestroy {
  readonly recorder: EventRecorder;

  constructor(@Inject(MESSAGE_BUS) bus: MessageBus, @Inject(EVENT_STORE) store: EventStore) {
    this.recorder = new EventRecorder(bus, store, { consumer: 'rollout-manager', topics: ROLLOUT_MANAGER_INPUTS });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.recorder.start();
  }

  onModuleDestroy(): Promise<void> {
    return this.recorder.stop();
  }
}
