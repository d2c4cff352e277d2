import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { DecidingConsumer, EVENT_STORE, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { createWeightRegistryDecider, WEIGHT_REGISTRY_INPUT_TYPES, WeightRegistryEvent, WeightRegistryInput, WeightRegistryState } from './registry';

/**
 * Weight registry: weight versions, which instance holds which buckets, the relay set, and
 * point-to-point pull scheduling (paper §5.2.1, §5.2.2). The rules are the decider in `registry/`;
 * this is the shell. The data plane (the agents' UCX transfers) is the Reconnect milestone.
 */
export const WEIGHT_REGISTRY_INPUTS = [Topics.membership, Topics.weights, Topics.verdicts, Topics.control] as const;

@Module({})
export class WeightRegistryModule implements OnApplicationBootstrap, OnModuleDestroy {
  readonly consumer: DecidingConsumer<WeightRegistryState, WeightRegistryInput, WeightRegistryEvent>;

  constructor(@Inject(MESSAGE_BUS) bus: MessageBus, @Inject(EVENT_STORE) store: EventStore) {
    this.consumer = new DecidingConsumer(bus, store, {
      consumer: 'weight-registry',
      topics: WEIGHT_REGISTRY_INPUTS,
      inputTypes: WEIGHT_REGISTRY_INPUT_TYPES,
      decider: createWeightRegistryDecider(),
      tickIntervalMs: null,
    });
  }

  onApplicationBootstrap(): Promise<void> {
    return this.consumer.start();
  }

  onModuleDestroy(): Promise<void> {
    return this.consumer.stop();
  }
}
