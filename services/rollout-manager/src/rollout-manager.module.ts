import { Inject, Module, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { DecidingConsumer, EVENT_STORE, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { createRolloutPoolDecider, ROLLOUT_POOL_INPUT_TYPES, RolloutPoolEvent, RolloutPoolInput, RolloutPoolState } from './pool';
import { routerConfigFromEnv, RouterRuntime } from './router-runtime';

/**
 * Rollout manager: the rollout pool — which instances serve, which trajectories each has in flight,
 * and their reassignment when an instance dies or is lent to the trainer (paper §3, §5.2.2). The
 * rules are the decider in `pool/`; this is the shell.
 */
export const ROLLOUT_MANAGER_INPUTS = [Topics.membership, Topics.telemetry, Topics.trajectories, Topics.verdicts, Topics.control] as const;

@Module({})
export class RolloutManagerModule implements OnApplicationBootstrap, OnModuleDestroy {
  readonly consumer: DecidingConsumer<RolloutPoolState, RolloutPoolInput, RolloutPoolEvent>;
  /** The OpenAI-compatible router, when this deployment routes the job's engines (ROBUSTRL_ROUTER_ENGINES). */
  readonly router: RouterRuntime | null;

  constructor(@Inject(MESSAGE_BUS) bus: MessageBus, @Inject(EVENT_STORE) store: EventStore) {
    const routerConfig = routerConfigFromEnv(process.env);
    this.router = routerConfig ? new RouterRuntime(bus, routerConfig) : null;
    this.consumer = new DecidingConsumer(bus, store, {
      consumer: 'rollout-manager',
      topics: ROLLOUT_MANAGER_INPUTS,
      inputTypes: ROLLOUT_POOL_INPUT_TYPES,
      decider: createRolloutPoolDecider(),
      tickIntervalMs: null,
      onApplied: (input, emitted) => this.router?.follow(input, emitted),
    });
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.consumer.start();
    await this.router?.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.router?.stop();
    await this.consumer.stop();
  }
}
