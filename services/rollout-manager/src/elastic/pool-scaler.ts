import { Logger } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { createCausedMessage, DataOf, MessageOf, RobustrlMessage, Topics } from '@robustrl/contracts';
import { Orchestrator } from '@robustrl/orchestrator';
import { CommandContext, CommandExecutor } from '@robustrl/service-kit';
import { EventStore } from '@robustrl/store';
import { planScale, RolloutPoolState } from '@robustrl/rollout-manager-domain';

type Scale = MessageOf<'ScaleRolloutPool'>;

/**
 * The elastic rollout pool (paper §3, ElasticRayWorkerGroup: create/destroy workers, scale up):
 * carries out ScaleRolloutPool through the orchestrator. Scaling down first announces each machine
 * leaving (MachineDeregistered), so the pool moves its trajectories to the machines that stay, then
 * releases it — gracefully, without cordoning a healthy node or replacing it. The announcements and
 * the outcome leave through the scaler's outbox (CommandExecutor), like everything the service emits.
 */
export class PoolScaler {
  static readonly CONSUMER = 'rollout-manager-scaler';
  /** What it reads and what it publishes: its part of the rollout manager's topic rights (libs/bus/src/kafka/topic-acls.ts). */
  static readonly INPUT_TOPICS = [Topics.control] as const;
  static readonly OUTPUT_TYPES = ['MachineDeregistered', 'RolloutPoolScaled', 'RolloutPoolScaleFailed'] as const;
  private readonly logger = new Logger('pool-scaler');
  private readonly executor: CommandExecutor<Scale>;

  constructor(
    bus: MessageBus,
    store: EventStore,
    private readonly orchestrator: Orchestrator,
    /** The pool as the rollout manager sees it now (its deciding consumer's state). */
    private readonly poolOf: (jobId: string) => RolloutPoolState | undefined,
  ) {
    this.executor = new CommandExecutor<Scale>(bus, store, {
      consumer: PoolScaler.CONSUMER,
      topics: PoolScaler.INPUT_TOPICS,
      types: ['ScaleRolloutPool'],
      execute: (command, context) => this.scale(command, context),
    });
  }

  start(): Promise<void> {
    return this.executor.start();
  }

  stop(): Promise<void> {
    return this.executor.stop();
  }

  private async scale(command: Scale, context: CommandContext): Promise<RobustrlMessage[]> {
    const started = Date.now();
    const d = command.data;
    const pool = this.poolOf(command.jobId);
    const plan = pool ? planScale(pool, d) : { current: [], add: d.targetMachines, remove: [] };
    const added: string[] = [];
    const removed: string[] = [];
    const outcome = (error?: string) => {
      const data = {
        commandId: d.commandId,
        from: plan.current.length,
        to: plan.current.length + added.length - removed.length,
        added,
        removed,
        durationMs: Date.now() - started,
      };
      return error === undefined
        ? caused('RolloutPoolScaled', data, command)
        : caused('RolloutPoolScaleFailed', { ...data, error: error.slice(0, 2000) || 'unknown error' }, command);
    };
    try {
      for (const machineId of plan.remove) {
        // Announced first: the pool reassigns the machine's trajectories before it goes.
        await context.emit([caused('MachineDeregistered', { machineId, reason: `scaled down by ${d.commandId}: ${d.reason}` }, command)]);
        const released = await this.orchestrator.releaseMachine({
          operationId: `${d.commandId}/release/${machineId}`,
          jobId: command.jobId,
          machineId,
          reason: d.reason,
        });
        if (released !== machineId) {
          // A StatefulSet gives back its highest ordinal, whichever we asked for: that one leaves too.
          await context.emit([
            caused('MachineDeregistered', { machineId: released, reason: `scaled down by ${d.commandId} (released in place of ${machineId})` }, command),
          ]);
        }
        removed.push(released);
      }
      for (let i = 0; i < plan.add; i++) {
        const machine = await this.orchestrator.requestMachine({
          operationId: `${d.commandId}/add/${i}`,
          jobId: command.jobId,
          role: 'rollout',
          zone: d.zone,
          hardwareClass: d.hardwareClass,
        });
        added.push(machine.machineId);
      }
      this.logger.log(
        `${d.commandId}: ${plan.current.length} → ${plan.current.length + added.length - removed.length} rollout machines in ${d.zone}/${d.hardwareClass}`,
      );
      return [outcome()];
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      this.logger.warn(`${d.commandId} failed: ${error}`);
      return [outcome(error)];
    }
  }
}

function caused<T extends (typeof PoolScaler.OUTPUT_TYPES)[number]>(type: T, data: DataOf<T>, command: Scale): RobustrlMessage {
  return createCausedMessage(type, data, command, { source: 'rollout-manager', occurredAt: new Date().toISOString() }) as RobustrlMessage;
}
