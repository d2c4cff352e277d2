import { DynamicModule, Inject, Logger, Module, OnApplicationBootstrap, OnModuleDestroy, Optional } from '@nestjs/common';
import { certifyPromotions, identitySecretFromEnv, MessageBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { departureSourceOf, Orchestrator, orchestratorFromEnv } from '@robustrl/orchestrator';
import { CLOCK, DecidingConsumer, EVENT_STORE, MESSAGE_BUS } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { z } from 'zod';
import { DepartureRelay } from './executor/departure-relay';
import { RecoveryExecutor } from './executor/recovery-executor';
import { EttrController } from './ettr/ettr.controller';
import { JobStartController } from './jobs/job-start.controller';
import { EttrProjector } from './ettr/ettr-projector';
import { RecoveryMetrics } from './metrics/recovery-metrics';
import {
  CONTROLLER_INPUT_TYPES,
  ControllerEvent,
  ControllerInput,
  ControllerSettings,
  ControllerState,
  createControllerDecider,
  DEFAULT_CONTROLLER_SETTINGS,
} from '@robustrl/controller-domain';

/**
 * Controller: role-based recovery (paper §5.1, Figure 7). The workflow is the decider in
 * `recovery/`; the executor for platform-level commands is in `executor/`; this is the shell.
 */
export const CONTROLLER_INPUTS = [Topics.membership, Topics.telemetry, Topics.verdicts, Topics.control, Topics.replies, Topics.training] as const;
export const ORCHESTRATOR = Symbol('ORCHESTRATOR');

function commandTimeoutMs(env: NodeJS.ProcessEnv): number {
  const raw = env.ROBUSTRL_COMMAND_TIMEOUT_SECONDS;
  if (raw === undefined || raw === '') return DEFAULT_CONTROLLER_SETTINGS.commandTimeoutMs;
  const parsed = z.coerce.number().positive().safeParse(raw);
  if (!parsed.success) throw new Error(`ROBUSTRL_COMMAND_TIMEOUT_SECONDS must be a positive number, got '${raw}'`);
  return Math.round(parsed.data * 1000);
}

/**
 * ROBUSTRL_DEPARTURE_POLL_SECONDS (default 2; 0 = off): how often the orchestrator's platform is read
 * for departures it announces (a drain's eviction, a preemption, a removal taint), when it has them.
 */
function departurePollMs(env: NodeJS.ProcessEnv): number {
  const raw = env.ROBUSTRL_DEPARTURE_POLL_SECONDS;
  if (raw === undefined || raw === '') return 2_000;
  const parsed = z.coerce.number().nonnegative().safeParse(raw);
  if (!parsed.success) throw new Error(`ROBUSTRL_DEPARTURE_POLL_SECONDS must be a number of seconds ≥ 0 (0 turns it off), got '${raw}'`);
  return Math.round(parsed.data * 1000);
}

/** ROBUSTRL_RECOVERY_POLICY: `role-based` (default) or `task-restart` (every fault restarts the whole task). */
function recoveryPolicy(env: NodeJS.ProcessEnv): ControllerSettings['policy'] {
  const raw = env.ROBUSTRL_RECOVERY_POLICY;
  if (raw === undefined || raw === '') return DEFAULT_CONTROLLER_SETTINGS.policy;
  if (raw !== 'role-based' && raw !== 'task-restart') throw new Error(`ROBUSTRL_RECOVERY_POLICY must be 'role-based' or 'task-restart', got '${raw}'`);
  return raw;
}

/**
 * Restart budgets, each a whole number ≥ 0 of restarts within a window of seconds:
 *  - ROBUSTRL_ENGINE_RESTART_BUDGET (default 2; 0 = always replace) in-place rollout engine restarts per
 *    machine within ROBUSTRL_ENGINE_RESTART_WINDOW_SECONDS (default 3600) before a process fault replaces the machine;
 *  - ROBUSTRL_MACHINE_RESTART_BUDGET (default 2; 0 = never retire) restarts of a trainer machine for its own
 *    faults within ROBUSTRL_MACHINE_RESTART_WINDOW_SECONDS (default 3600) before its next fault retires it.
 */
function restartBudgets(
  env: NodeJS.ProcessEnv,
): Pick<ControllerSettings, 'engineRestartBudget' | 'engineRestartWindowMs' | 'machineRestartBudget' | 'machineRestartWindowMs'> {
  const budget = (name: string, fallback: number) => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const parsed = z.coerce.number().int().nonnegative().safeParse(raw);
    if (!parsed.success) throw new Error(`${name} must be a whole number ≥ 0, got '${raw}'`);
    return parsed.data;
  };
  const windowMs = (name: string, fallback: number) => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const parsed = z.coerce.number().positive().safeParse(raw);
    if (!parsed.success) throw new Error(`${name} must be a positive number, got '${raw}'`);
    return Math.round(parsed.data * 1000);
  };
  const d = DEFAULT_CONTROLLER_SETTINGS;
  return {
    engineRestartBudget: budget('ROBUSTRL_ENGINE_RESTART_BUDGET', d.engineRestartBudget),
    engineRestartWindowMs: windowMs('ROBUSTRL_ENGINE_RESTART_WINDOW_SECONDS', d.engineRestartWindowMs),
    machineRestartBudget: budget('ROBUSTRL_MACHINE_RESTART_BUDGET', d.machineRestartBudget),
    machineRestartWindowMs: windowMs('ROBUSTRL_MACHINE_RESTART_WINDOW_SECONDS', d.machineRestartWindowMs),
  };
}

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
      decider: createControllerDecider({
        commandTimeoutMs: commandTimeoutMs(process.env),
        policy: recoveryPolicy(process.env),
        ...restartBudgets(process.env),
      }),
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
