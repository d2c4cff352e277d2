import { DynamicModule, Inject, Logger, Module, OnApplicationBootstrap, OnModuleDestroy, Optional } from '@nestjs/common';
import { certifyPromotions, identitySecretFromEnv, MessageBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { departureSourceOf, Orchestrator, orchestratorFromEnv } from '@robustrl/orchestrator';
import { CLOCK, DecidingConsumer, EVENT_STORE, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { controllerSettingsFromEnv, departurePollMs } from './controller-config';
import { DepartureRelay } from './executor/departure-relay';
import { RecoveryExecutor } from './executor/recovery-executor';
import { EttrController } from './ettr/ettr.controller';
import { JobStartController } from './jobs/job-start.controller';
import { EttrProjector } from './ettr/ettr-projector';
import { RecoveryMetrics } from './metrics/recovery-metrics';
import { CONTROLLER_INPUT_TYPES, ControllerEvent, ControllerInput, ControllerState, createControllerDecider } from '@robustrl/controller-domain';

/**
 * Controller: role-based recovery (paper §5.1, Figure 7). The workflow is the decider in
 * `recovery/`; the executor for platform-level commands is in `executor/`; this is the shell.
 */
export const CONTROLLER_INPUTS = [Topics.membership, Topics.telemetry, Topics.verdicts, Topics.control, Topics.replies, Topics.training] as const;
export const ORCHESTRATOR = Symbol('ORCHESTRATOR');

function promotionCertificates(env: NodeJS.ProcessEnv) {
  const secret = identitySecretFromEnv(env);
  return secret === undefined ? undefined : certifyPromotions(secret);
}

// EttrProjector starts and stops itself (its own lifecycle hooks): a read model, independent of the consumer below.
// Their metrics go to the process's registry, served at /metrics by the service kit.
@Module({ providers: [RecoveryMetrics, EttrProjector], controllers: [EttrController, JobStartController], exports: [RecoveryMetrics] })
export class ControllerModule implements OnApplicationBootstrap, OnModuleDestroy {
  readonly consumer: DecidingConsumer<ControllerState, ControllerEvent, ControllerInput>;
  readonly executor: RecoveryExecutor | null;
  /** The platform's departure notices as evidence, when the orchestrator's platform announces them. */
  readonly departures: DepartureRelay | null;

  /** The controller with an orchestrator given in code (the local process supervisor in tests and the demo). */
  static withOrchestrator(orchestrator: Orchestrator): DynamicModule {
    return { module: ControllerModule, providers: [{ provide: ORCHESTRATOR, useValue: orchestrator }] };
  }

  constructor(
    @Inject(MESSAGE_BUS) bus: MessageBus,
    @Inject(EVENT_STORE) store: EventStore,
    @Inject(RecoveryMetrics) metrics: RecoveryMetrics,
    @Optional() @Inject(ORCHESTRATOR) orchestrator: Orchestrator | null,
    @Optional() @Inject(CLOCK) clock: (() => number) | null,
  ) {
    const chosen = orchestrator ?? orchestratorFromEnv(process.env);
    this.consumer = new DecidingConsumer(bus, store, {
      consumer: 'controller',
      topics: CONTROLLER_INPUTS,
      inputTypes: CONTROLLER_INPUT_TYPES,
      decider: createControllerDecider(controllerSettingsFromEnv(process.env)),
      tickIntervalMs: 1000,
      clock: clock ?? undefined,
      // A standby lent to the trainer shows this certificate when it says it trains (role-certificates.ts).
      completeDraft: promotionCertificates(process.env),
      onEmitted: (messages) => metrics.observe(messages),
    });
    this.executor = chosen ? new RecoveryExecutor(bus, store, chosen, (jobId) => this.consumer.stateOf(jobId)) : null;
    const source = chosen ? departureSourceOf(chosen) : null;
    const pollMs = departurePollMs(process.env);
    this.departures = source && pollMs > 0 ? new DepartureRelay(bus, source, { intervalMs: pollMs }) : null;
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.consumer.start();
    if (this.executor) await this.executor.start();
    this.departures?.start();
    if (!this.executor)
      new Logger('controller').warn(
        'no orchestrator (ROBUSTRL_ORCHESTRATOR=none): ReplaceMachine and RestartTask are decided but not carried out, and time out as failed',
      );
  }

  async onModuleDestroy(): Promise<void> {
    await this.departures?.stop();
    await this.executor?.stop();
    await this.consumer.stop();
  }
}
