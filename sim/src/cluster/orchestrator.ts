import type { MessageOf, RobustrlMessage } from '@robustrl/contracts';
import type { RestartKind, RestartStageSeconds } from '../report/report-types';
import type { Scenario } from '../scenario';
import type { ClusterEnvironment } from './cluster-environment';
import type { JobShape } from './cluster-model';
import type { FaultInjector } from './fault-injector';
import type { MachineAgents } from './machine-agents';
import type { RlPipeline } from './rl-pipeline';

type StageName = RestartStageSeconds['stage'];
export type { RestartKind };
export interface RestartRecord {
  kind: RestartKind;
  stages: Partial<Record<StageName, number>>;
}

/**
 * Carries out the control plane's recovery commands, as the cluster scheduler and the agents would, and
 * records each restart's stages for the report's breakdown. It decides nothing: the controller chose.
 */
/** The agent stopping what is left of a crashed engine and starting a new one (its start is `engineStartSeconds`). */
const ENGINE_STOP_MS = 2_000;

export class Orchestrator {
  readonly restarts: RestartRecord[] = [];
  private nextMachine: number;

  constructor(
    private readonly k: ClusterEnvironment,
    private readonly s: Scenario,
    private readonly shape: JobShape,
    private readonly agents: MachineAgents,
    private readonly pipeline: RlPipeline,
    private readonly faults: FaultInjector,
  ) {
    this.nextMachine = s.cluster.rolloutMachines;
    k.subscribe(['RestartTrainerGroup', 'ReplaceMachine', 'RestartTask', 'PromoteRolloutToTrainer', 'RestartRolloutEngine'], (m) => this.onCommand(m));
  }

  private onCommand(message: RobustrlMessage): void {
    switch (message.type) {
      case 'RestartTrainerGroup':
        return this.restartTrainerGroup(message as MessageOf<'RestartTrainerGroup'>);
      case 'ReplaceMachine':
        return this.replaceMachine(message as MessageOf<'ReplaceMachine'>);
      case 'RestartTask':
        return this.restartTask(message as MessageOf<'RestartTask'>);
      case 'PromoteRolloutToTrainer':
        return this.promote(message as MessageOf<'PromoteRolloutToTrainer'>);
      case 'RestartRolloutEngine':
        return this.restartEngine(message as MessageOf<'RestartRolloutEngine'>);
    }
  }

  private answer(c: { recoveryId: string; commandId: string }, machineId: string, error: string | null, durationMs: number): void {
    const base = { recoveryId: c.recoveryId, commandId: c.commandId, machineId, executor: `agent/${machineId}`, durationMs: Math.round(durationMs) };
    if (error) this.k.emit('RecoveryCommandFailed', { ...base, error }, `agent/${machineId}`);
    else this.k.emit('RecoveryCommandSucceeded', base, `agent/${machineId}`);
  }

  /**
   * Warm standby (paper §5.1.3): the rollout's agent stops its engine and hands the machine to the
   * trainer group; what it was generating moves to the other rollouts. The group restart that follows
   * loads the checkpoint on it (its stages are the trainer restart's).
   */
  private promote(c: MessageOf<'PromoteRolloutToTrainer'>): void {
    const m = this.agents.machines.get(c.data.rolloutMachineId);
    if (!m || !m.alive || m.role !== 'rollout') {
      this.answer(c.data, c.data.rolloutMachineId, `${c.data.rolloutMachineId} is not a live rollout machine`, 0);
      return;
    }
    const teardown = this.s.restart.trainerTeardownSeconds;
    this.restarts.push({ kind: 'warm-standby', stages: { teardown } });
    for (const x of m.running) x.epoch++;
    this.pipeline.evacuate(m);
    this.agents.lendToTrainer(m, `warm standby for ${c.data.replacesMachineId} (${c.data.recoveryId})`);
    this.k.after(teardown * 1000, () => this.answer(c.data, m.id, null, teardown * 1000));
  }

  /**
   * A crashed engine restarted in place on its healthy machine: no scheduling, no container,
   * the engine starts and pulls the current weights again — the machine re-registers and the registry
   * has it pull, as after a replacement.
   */
  private restartEngine(c: MessageOf<'RestartRolloutEngine'>): void {
    const m = this.agents.machines.get(c.data.machineId);
    if (!m || !m.alive) {
      this.answer(c.data, c.data.machineId, `${c.data.machineId} is unreachable`, 0);
      return;
    }
    const r = this.s.restart;
    this.restarts.push({
      kind: 'engine-restart',
      stages: { 'engine-start': r.engineStartSeconds, 'weight-sync': this.shape.pullSeconds * this.s.training.weightBuckets },
    });
    m.process = 'starting';
    m.epoch++;
    m.held.clear();
    m.heldChanges++;
    m.buckets.clear();
    this.k.after(ENGINE_STOP_MS, () => {
      this.answer(c.data, m.id, null, ENGINE_STOP_MS);
      this.agents.bootProcess(m, 'engine-restart');
      this.faults.armRollout(m);
    });
  }

  private restartTrainerGroup(c: MessageOf<'RestartTrainerGroup'>): void {
    const r = this.s.restart;
    this.restarts.push({
      kind: 'trainer-restart',
      stages: { teardown: r.trainerTeardownSeconds, 'checkpoint-load': r.checkpointLoadSeconds, 'worker-init': r.workerInitSeconds },
    });
    for (const id of c.data.machines) {
      const m = this.agents.machines.get(id);
      if (!m) continue;
      m.process = 'starting';
      m.epoch++;
      this.k.after(r.trainerTeardownSeconds * 1000, () => {
        this.k.emit(
          'RecoveryCommandSucceeded',
          {
            recoveryId: c.data.recoveryId,
            commandId: c.data.commandId,
            machineId: id,
            executor: `agent/${id}`,
            durationMs: Math.round(r.trainerTeardownSeconds * 1000),
          },
          `agent/${id}`,
        );
        this.agents.bootProcess(m, 'trainer-restart');
      });
    }
  }

  private replaceMachine(c: MessageOf<'ReplaceMachine'>): void {
    const r = this.s.restart;
    const old = this.agents.machines.get(c.data.machineId);
    const seconds = r.machineSchedulingSeconds + r.containerStartSeconds;
    this.restarts.push({
      kind: 'rollout-replacement',
      stages: {
        'machine-scheduling': r.machineSchedulingSeconds,
        'container-start': r.containerStartSeconds,
        'engine-start': r.engineStartSeconds,
        'weight-sync': this.shape.pullSeconds * this.s.training.weightBuckets,
      },
    });
    if (old) {
      old.alive = false;
      old.process = 'dead';
      this.k.emit('MachineDeregistered', { machineId: old.id, reason: `replaced (${c.data.recoveryId})` }, 'sim/orchestrator');
      this.agents.removeMachine(old.id);
    }
    const role = c.data.role === 'rollout' ? 'rollout' : 'trainer';
    const id = `${role}-${this.nextMachine++}`;
    this.k.after(seconds * 1000, () => {
      const m = this.agents.addMachine(id, role, role === 'rollout' ? this.shape.rolloutSlots : 0);
      this.k.emit(
        'RecoveryCommandSucceeded',
        {
          recoveryId: c.data.recoveryId,
          commandId: c.data.commandId,
          machineId: null,
          executor: 'sim/orchestrator',
          durationMs: Math.round(seconds * 1000),
          newMachineId: id,
        },
        'sim/orchestrator',
      );
      this.agents.bootProcess(m, 'replacement');
      if (role === 'rollout') this.faults.armRollout(m);
    });
  }

  /** In place (paper §7.1: ByteRobust's in-place restart, no rescheduling): every process restarts; in-flight rollouts are lost. */
  private restartTask(c: MessageOf<'RestartTask'>): void {
    const r = this.s.restart;
    this.restarts.push({
      kind: 'task-restart',
      stages: {
        'container-start': r.instanceRestartSeconds,
        'engine-start': r.engineStartSeconds,
        'rollout-init': r.rolloutInitSeconds,
        'checkpoint-load': r.checkpointLoadSeconds,
        'worker-init': r.workerInitSeconds,
        'weight-sync': this.shape.pullSeconds * this.s.training.weightBuckets,
      },
    });
    this.pipeline.restartFromCheckpoint();
    const up = r.instanceRestartSeconds * 1000;
    for (const m of this.agents.machines.values()) {
      m.process = 'starting';
      m.epoch++;
      m.running.clear();
      const wasDead = !m.alive;
      // Agents that stayed up keep the weight copies they hold (the registry, which is not told of a task
      // restart, still counts them as sources); a machine whose hardware had failed comes back empty.
      if (wasDead) {
        m.held.clear();
        m.heldChanges++;
        m.buckets.clear();
      }
      m.alive = true;
      // A machine whose hardware had failed comes back through the scheduler as well.
      this.k.after(up + (wasDead ? r.machineSchedulingSeconds * 1000 : 0), () => this.agents.bootProcess(m, 'task-restart'));
      if (wasDead && m.role === 'rollout') this.faults.armRollout(m);
    }
    this.k.after(up, () => {
      this.k.emit(
        'RecoveryCommandSucceeded',
        { recoveryId: c.data.recoveryId, commandId: c.data.commandId, machineId: null, executor: 'sim/orchestrator', durationMs: Math.round(up) },
        'sim/orchestrator',
      );
    });
  }
}
