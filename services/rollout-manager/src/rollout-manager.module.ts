import { DynamicModule, Inject, Logger, Module, OnApplicationBootstrap, OnModuleDestroy, Optional } from '@nestjs/common';
import { Orchestrator, orchestratorFromEnv } from '@robustrl/orchestrator';
import { MessageBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { CLOCK, DecidingConsumer, EVENT_STORE, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { createRolloutPoolDecider, ROLLOUT_POOL_INPUT_TYPES, RolloutPoolEvent, RolloutPoolInput, RolloutPoolState } from '@robustrl/rollout-manager-domain';
import { PoolScaler } from './elastic/pool-scaler';
import { routerConfigFromEnv } from './router-config';
import { RouterRuntime } from './router-runtime';

export const ROLLOUT_ORCHESTRATOR = Symbol('ROLLOUT_ORCHESTRATOR');

/**
 * Rollout manager: the rollout pool — which instances serve, which trajectories each has in flight,
 * and their reassignment when an instance dies or is lent to the trainer (paper §3, §5.2.2). The
 * rules are the decider in `pool/`; this is the shell.
 */
export const ROLLOUT_MANAGER_INPUTS = [Topics.membership, Topics.telemetry, Topics.trajectories, Topics.verdicts, Topics.control, Topics.weights] as const;

@Module({})
export class RolloutManagerModule implements OnApplicationBootstrap, OnModuleDestroy {
  /** The rollout pool's deciding consumer; none in a router replica (ROBUSTRL_ROUTER_REPLICA=on), which decides nothing. */
  readonly consumer: DecidingConsumer<RolloutPoolState, RolloutPoolEvent, RolloutPoolInput> | null;
  /** The OpenAI-compatible router, when this deployment routes the job's engines (ROBUSTRL_ROUTER, ROBUSTRL_ROUTER_ENGINES). */
  readonly router: RouterRuntime | null;
  /** Carries out ScaleRolloutPool when an orchestrator is configured (ROBUSTRL_ORCHESTRATOR). */
  readonly scaler: PoolScaler | null;

  /** The rollout manager with an orchestrator given in code (the local process supervisor in tests and the demo). */
  static withOrchestrator(orchestrator: Orchestrator): DynamicModule {
    return { module: RolloutManagerModule, providers: [{ provide: ROLLOUT_ORCHESTRATOR, useValue: orchestrator }] };
  }

  constructor(
    @Inject(MESSAGE_BUS) bus: MessageBus,
    @Inject(EVENT_STORE) store: EventStore,
    @Optional() @Inject(ROLLOUT_ORCHESTRATOR) orchestrator: Orchestrator | null,
    @Optional() @Inject(CLOCK) clock: (() => number) | null,
  ) {
    const routerConfig = routerConfigFromEnv(process.env);
    this.router = routerConfig ? new RouterRuntime(bus, routerConfig, (jobId) => this.consumer?.stateOf(jobId)) : null;
    if (routerConfig?.replica) {
      this.consumer = null;
      this.scaler = null;
      return;
    }
    this.consumer = new DecidingConsumer(bus, store, {
      consumer: 'rollout-manager',
      topics: ROLLOUT_MANAGER_INPUTS,
      inputTypes: ROLLOUT_POOL_INPUT_TYPES,
      decider: createRolloutPoolDecider(),
      tickIntervalMs: null,
      clock: clock ?? undefined,
      onApplied: (input, emitted) => this.router?.follow(input, emitted),
    });
    const chosen = orchestrator ?? orchestratorFromEnv(process.env);
    this.scaler = chosen ? new PoolScaler(bus, store, chosen, (jobId) => this.consumer?.stateOf(jobId)) : null;
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.consumer?.start();
    await this.router?.start();
    if (!this.consumer) new Logger('rollout-manager').log('a router replica: no rollout pool consumer, no scaler');
    else if (this.scaler) await this.scaler.start();
    else new Logger('rollout-manager').log('no orchestrator (ROBUSTRL_ORCHESTRATOR=none): ScaleRolloutPool commands are not carried out');
  }

  async onModuleDestroy(): Promise<void> {
    await this.scaler?.stop();
    await this.router?.stop();
    await this.consumer?.stop();
  }
}
