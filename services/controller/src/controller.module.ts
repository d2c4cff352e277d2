import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { EVENT_STORE, EventRecorder, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';

/**
 * Controller: role-based recovery, restart the trainer in place, warm standby, replace rollouts, escalate by the rules of paper §5.1.2.
 *
 * Today a shell: it consumes its input topics and records them once in the event log. Its rules
 * arrive as pure deciders in their own files next to this one.
 */
export const CONTROLLER_INPUTS = [Topics.membership, Topics.verdicts, Topics.control, Topics.training] as const;

@Module({})
export class ControllerModule implements OnApplicationBootstrap, OnModuleDestroy {
  readonly recorder: EventRecorder;

  constructor(@Inject(MESSAGE_BUS) bus: MessageBus, @Inject(EVENT_STORE) store: EventStore) {
    this.recorder = new EventRecorder(bus, store, { consumer: 'controller', topics: CONTROLLER_INPUTS });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.recorder.start();
  }

  onModuleDestroy(): Promise<void> {
    return this.recorder.stop();
  }
}
