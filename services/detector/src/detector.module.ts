import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { EVENT_STORE, EventRecorder, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';

/**
 * Detector: role- and phase-aware fault detection of trainer and rollout machines (paper §4).
 *
 * Today a shell: it consumes its input topics and records them once in the event log. Its rules
 * arrive as pure deciders in their own files next to this one.
 */
export const DETECTOR_INPUTS = [Topics.membership, Topics.telemetry, Topics.heartbeat, Topics.training] as const;

@Module({})
export class DetectorModule implements OnApplicationBootstrap, OnModuleDestroy {
  readonly recorder: EventRecorder;

  constructor(@Inject(MESSAGE_BUS) bus: MessageBus, @Inject(EVENT_STORE) store: EventStore) {
    this.recorder = new EventRecorder(bus, store, { consumer: 'detector', topics: DETECTOR_INPUTS });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.recorder.start();
  }

  onModuleDestroy(): Promise<void> {
    return this.recorder.stop();
  }
}
