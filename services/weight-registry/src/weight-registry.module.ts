import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { EVENT_STORE, EventRecorder, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';

/**
 * Weight registry: weight versions, relay servers, point-to-point pull scheduling (paper §5.2.1).
 *
 * Today a shell: it consumes its input topics and records them once in the event log. Its rules
 * arrive as pure deciders in their own files next to this one.
 */
export const WEIGHT_REGISTRY_INPUTS = [Topics.membership, Topics.weights, Topics.verdicts] as const;

@Module({})
export class WeightRegistryModule implements OnApplicationBootstrap, OnModuleDestroy {
  readonly recorder: EventRecorder;

  constructor(@Inject(MESSAGE_BUS) bus: MessageBus, @Inject(EVENT_STORE) store: EventStore) {
    this.recorder = new EventRecorder(bus, store, { consumer: 'weight-registry', topics: WEIGHT_REGISTRY_INPUTS });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.recorder.start();
  }

  onModuleDestroy(): Promise<void> {
    return this.recorder.stop();
  }
}
