import { createHash } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { SpanStatusCode } from '@opentelemetry/api';
import { MessageBus } from '@robustrl/bus';
import { createCausedMessage, createMessage, MessageOf, RobustrlMessage, Topics } from '@robustrl/contracts';
import { Orchestrator } from '@robustrl/orchestrator';
import { CommandContext, CommandExecutor } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { tracer } from '@robustrl/telemetry';
import { ControllerState } from '@robustrl/controller-domain';

type ExecutedCommand = MessageOf<'ReplaceMachine' | 'RestartTask'>;

/**
 * The paper's TaskRunner for what only the platform can do: replace a machine, restart the whole
 * task. (In-place role restarts and promotions are carried out by the agents on the machines.)
 *
 * Each command is executed once (CommandExecutor), and the orchestrator is idempotent per command id
 * for a crash between acting and recording. Everything it publishes (the outcome, the machine it
 * isolated, the resumed job) leaves through its outbox.
 *
 * What it needs to know beyond the command, it reads without touching another module's tables:
 * - the checkpoint a restarted task resumes from is the controller decider's `lastCheckpointStep`
 *   (its state, folded from CheckpointSaved and resumes), the same value the decider puts on a
 *   RestartTrainerGroup: one notion of "the checkpoint to reload", from the consumer that decided;
 * - the job's shape (mode, machine counts, detection settings) to announce the resumed job with is
 *   the job's latest JobStarted, through the store's typed read (`latestOfType`): neither the command
 *   nor the decider's state carries it.
 */
export class RecoveryExecutor {
  private readonly logger = new Logger('recovery-executor');
  private readonly executor: CommandExecutor<ExecutedCommand>;
  static readonly CONSUMER = 'controller-executor';
  /** What it reads and what it publishes: its part of the controller's topic rights (libs/bus/src/kafka/topic-acls.ts). */
  static readonly INPUT_TOPICS = [Topics.control] as const;
  static readonly OUTPUT_TYPES = ['RecoveryCommandSucceeded', 'RecoveryCommandFailed', 'JobStarted', 'MachineDeregistered'] as const;

  constructor(
    bus: MessageBus,
    private readonly store: EventStore,
    private readonly orchestrator: Orchestrator,
    /** The job as the controller sees it now (its deciding consumer's state). */
    private readonly controllerStateOf: (jobId: string) => ControllerState | undefined,
  ) {
    this.executor = new CommandExecutor<ExecutedCommand>(bus, store, {
      consumer: RecoveryExecutor.CONSUMER,
      topics: RecoveryExecutor.INPUT_TOPICS,
      types: ['ReplaceMachine', 'RestartTask'],
      execute: (command, context) => this.carryOut(command, context),
    });
  }

  async start(): Promise<void> {
    await this.executor.start();
    this.logger.log(`through the ${this.orchestrator.kind} orchestrator`);
  }

  stop(): Promise<void> {
    return this.executor.stop();
  }

  private async carryOut(command: ExecutedCommand, context: CommandContext): Promise<RobustrlMessage[]> {
    const started = Date.now();
    const span = tracer().startSpan(`execute ${command.type}`, {
      attributes: { 'robustrl.command_id': command.data.commandId, 'robustrl.orchestrator': this.orchestrator.kind },
    });
    const outcome: RobustrlMessage[] = [];
    try {
      const result = await this.execute(command, context);
      outcome.push(...result.events);
      outcome.push(
        this.caused(command, 'RecoveryCommandSucceeded', {
          recoveryId: command.data.recoveryId,
          commandId: command.data.commandId,
          machineId: command.type === 'ReplaceMachine' ? command.data.machineId : null,
          executor: `orchestrator/${this.orchestrator.kind}`,
          durationMs: Date.now() - started,
          ...(result.newMachineId ? { newMachineId: result.newMachineId } : {}),
        }),
      );
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error });
      this.logger.warn(`${command.type} ${command.data.commandId} failed: ${error}`);
      outcome.push(
        this.caused(command, 'RecoveryCommandFailed', {
          recoveryId: command.data.recoveryId,
          commandId: command.data.commandId,
          machineId: command.type === 'ReplaceMachine' ? command.data.machineId : null,
          executor: `orchestrator/${this.orchestrator.kind}`,
          durationMs: Date.now() - started,
          error: error.slice(0, 2000) || 'unknown error',
        }),
      );
    } finally {
      span.end();
    }
    return outcome;
  }

  private async execute(command: ExecutedCommand, context: CommandContext): Promise<{ events: RobustrlMessage[]; newMachineId?: string }> {
    const jobId = command.jobId;
    const operationId = command.data.commandId;
    if (command.type === 'RestartTask') {
      const previous = await this.store.latestOfType(jobId, 'JobStarted');
      const checkpoint = this.controllerStateOf(jobId)?.lastCheckpointStep ?? null;
      // The restarted task resumes from the last checkpoint: a fresh first iteration (paper §5.1.2 rule 1).
      // Announced before its machines restart, so that every registration of the new incarnation comes
      // after it (a trainer's first launch forgets the membership from before it: trainer-roster.ts).
      // Derived from the command (its id and time), so that carrying it out again announces the same restart.
      if (previous)
        await context.emit([
          createMessage(
            'JobStarted',
            // Its first group starts at the command's trainer epoch, which fences every group before it (docs/contributors/recovery.md "Fencing").
            {
              ...previous.data,
              resumedFromStep: checkpoint,
              ...(command.data.trainerEpoch === undefined ? {} : { trainerEpoch: command.data.trainerEpoch }),
            },
            {
              jobId,
              source: 'controller/executor',
              occurredAt: command.occurredAt,
              causationId: command.eventId,
              correlationId: command.correlationId,
              eventId: derivedEventId(`${command.eventId}/JobStarted`),
            },
          ) as RobustrlMessage,
        ]);
      await this.orchestrator.restartTask({ operationId, jobId });
      return { events: [] };
    }
    const d = command.data;
    await this.orchestrator.isolateMachine({ operationId: `${operationId}/isolate`, jobId, machineId: d.machineId, reason: `recovery ${d.recoveryId}` });
    // Announced before the replacement is requested, as soon as the machine is out.
    await context.emit([this.caused(command, 'MachineDeregistered', { machineId: d.machineId, reason: `isolated by ${d.recoveryId}` })]);
    const fresh = await this.orchestrator.requestMachine({
      operationId: `${operationId}/request`,
      jobId,
      role: d.role,
      zone: d.zone,
      hardwareClass: d.hardwareClass,
      replaces: d.machineId,
    });
    return { events: [], newMachineId: fresh.machineId };
  }

  private caused<T extends (typeof RecoveryExecutor.OUTPUT_TYPES)[number]>(cause: ExecutedCommand, type: T, data: MessageOf<T>['data']): RobustrlMessage {
    return createCausedMessage(type, data as never, cause, { source: `controller/executor`, occurredAt: new Date().toISOString() }) as RobustrlMessage;
  }
}

/** A UUID (version 5 layout) derived from `of`: the same cause gives the same event id. */
export function derivedEventId(of: string): string {
  const h = createHash('sha256').update(of).digest('hex');
  const variant = (8 + (parseInt(h[16], 16) & 3)).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
