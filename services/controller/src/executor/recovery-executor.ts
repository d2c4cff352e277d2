import { Logger } from '@nestjs/common';
import { SpanStatusCode } from '@opentelemetry/api';
import { MessageBus } from '@robustrl/bus';
import { createCausedMessage, MessageOf, RobustrlMessage, Topics } from '@robustrl/contracts';
import { Orchestrator } from '@robustrl/orchestrator';
import { CommandExecutor } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { tracer } from '@robustrl/telemetry';

type ExecutedCommand = MessageOf<'ReplaceMachine' | 'RestartTask'>;

/**
 * The paper's TaskRunner for what only the platform can do: replace a machine, restart the whole
 * task. (In-place role restarts and promotions are carried out by the agents on the machines.)
 *
 * Each command is executed once (CommandExecutor), and the orchestrator is idempotent per command id
 * for a crash between acting and recording.
 */
export class RecoveryExecutor {
  private readonly logger = new Logger('recovery-executor');
  private readonly executor: CommandExecutor<ExecutedCommand>;
  static readonly CONSUMER = 'controller-executor';

  constructor(
    private readonly bus: MessageBus,
    private readonly store: EventStore,
    private readonly orchestrator: Orchestrator,
  ) {
    this.executor = new CommandExecutor<ExecutedCommand>(bus, store, {
      consumer: RecoveryExecutor.CONSUMER,
      topics: [Topics.control],
      types: ['ReplaceMachine', 'RestartTask'],
      execute: (command) => this.carryOut(command),
    });
  }

  async start(): Promise<void> {
    await this.executor.start();
    this.logger.log(`through the ${this.orchestrator.kind} orchestrator`);
  }

  stop(): Promise<void> {
    return this.executor.stop();
  }

  private async carryOut(command: ExecutedCommand): Promise<RobustrlMessage[]> {
    const started = Date.now();
    const span = tracer().startSpan(`execute ${command.type}`, { attributes: { 'robustrl.command_id': command.data.commandId, 'robustrl.orchestrator': this.orchestrator.kind } });
    const outcome: RobustrlMessage[] = [];
    try {
      const result = await this.execute(command);
      outcome.push(...result.events);
      outcome.push(this.caused(command, 'RecoveryCommandSucceeded', {
        recoveryId: command.data.recoveryId,
        commandId: command.data.commandId,
        machineId: command.type === 'ReplaceMachine' ? command.data.machineId : null,
        executor: `orchestrator/${this.orchestrator.kind}`,
        durationMs: Date.now() - started,
        ...(result.newMachineId ? { newMachineId: result.newMachineId } : {}),
      }));
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error });
      this.logger.warn(`${command.type} ${command.data.commandId} failed: ${error}`);
      outcome.push(this.caused(command, 'RecoveryCommandFailed', {
        recoveryId: command.data.recoveryId,
        commandId: command.data.commandId,
        machineId: command.type === 'ReplaceMachine' ? command.data.machineId : null,
        executor: `orchestrator/${this.orchestrator.kind}`,
        durationMs: Date.now() - started,
        error: error.slice(0, 2000) || 'unknown error',
      }));
    } finally {
      span.end();
    }
    return outcome;
  }

  private async execute(command: ExecutedCommand): Promise<{ events: RobustrlMessage[]; newMachineId?: string }> {
    const jobId = command.jobId;
    const operationId = command.data.commandId;
    if (command.type === 'RestartTask') {
      await this.orchestrator.restartTask({ operationId, jobId });
      const previous = await this.lastJobStarted(jobId);
      if (!previous) return { events: [] };
      const checkpoint = await this.lastCheckpoint(jobId);
      // The restarted task resumes from the last checkpoint: a fresh first iteration (paper §5.1.2 rule 1).
      return { events: [this.caused(command, 'JobStarted', { ...previous, resumedFromStep: checkpoint })] };
    }
    const d = command.data;
    await this.orchestrator.isolateMachine({ operationId: `${operationId}/isolate`, jobId, machineId: d.machineId, reason: `recovery ${d.recoveryId}` });
    const isolated = this.caused(command, 'MachineDeregistered', { machineId: d.machineId, reason: `isolated by ${d.recoveryId}` });
    await this.bus.publish(isolated);
    const fresh = await this.orchestrator.requestMachine({ operationId: `${operationId}/request`, jobId, role: d.role, zone: d.zone, hardwareClass: d.hardwareClass, replaces: d.machineId });
    return { events: [], newMachineId: fresh.machineId };
  }

  private async lastJobStarted(jobId: string): Promise<MessageOf<'JobStarted'>['data'] | null> {
    const rows: Array<{ data: unknown }> = await this.store.dataSource.query(
      `SELECT data FROM robustrl_event_log WHERE job_id = $1 AND type = 'JobStarted' ORDER BY global_position DESC LIMIT 1`,
      [jobId],
    );
    const data = rows[0]?.data;
    return data ? ((typeof data === 'string' ? JSON.parse(data) : data) as MessageOf<'JobStarted'>['data']) : null;
  }

  private async lastCheckpoint(jobId: string): Promise<number | null> {
    const rows: Array<{ step: number | null }> = await this.store.dataSource.query(
      `SELECT max((data->>'step')::int) AS step FROM robustrl_event_log WHERE job_id = $1 AND type = 'CheckpointSaved'`,
      [jobId],
    );
    return rows[0]?.step ?? null;
  }

  private caused<T extends 'RecoveryCommandSucceeded' | 'RecoveryCommandFailed' | 'JobStarted' | 'MachineDeregistered'>(
    cause: ExecutedCommand,
    type: T,
    data: MessageOf<T>['data'],
  ): RobustrlMessage {
    return createCausedMessage(type, data as never, cause, { source: `controller/executor`, occurredAt: new Date().toISOString() }) as RobustrlMessage;
  }
}
