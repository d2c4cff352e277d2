import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { EVENT_STORE, EventRecorder, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';

/**
 * Agent: the GPU-side service on every GPU machine; carries out restarts, answers probes, moves weights.
 *
 * Today a shell: it consumes its input topics and records them once in the event log. Its rules
 * arrive as pure deciders in their own files next to this one.
 */
export const AGENT_INPUTS = [Topics.control, Topics.heartbeat, Topics.weights] as const;

@Module({})
export class AgentModule implements OnApplicationBootstrap, OnModuleDestroy {
  readonly recorder: EventRecorder;

  constructor(@Inject(MESSAGE_BUS) bus: MessageBus, @Inject(EVENT_STORE) store: EventStore) {
    this.recorder = new EventRecorder(bus, store, { consumer: 'agent', topics: AGENT_INPUTS });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.recorder.start();
  }

  onModuleDestroy(): Promise<void> {
    return this.recorder.stop();
  }
}
