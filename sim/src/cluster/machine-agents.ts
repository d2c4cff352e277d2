import type { MessageOf } from '@robustrl/contracts';
import type { Scenario } from '../scenario';
import type { ClusterEnvironment } from './cluster-environment';
import type { JobShape, Machine } from './cluster-model';

/** What the agents need of the job: the pipeline is built after them, so this is bound late. */
export interface AgentsJob {
  /** The trainer's step, which every phase report carries. */
  trainerStep(): number;
  finished(): boolean;
  trainerReady(m: Machine): void;
  /** A rollout came up (`ready`: it may have free slots now) or now holds new weights: waiting samples may fit. */
  rolloutCanTakeMore(m: Machine, ready: boolean): void;
}

export type BootReason = 'startup' | 'task-restart' | 'trainer-restart' | 'replacement' | 'engine-restart';

/**
 * The agent on each machine: it registers the machine, boots its role process, reports phases and
 * telemetry, answers heartbeat probes and carries out the weight pulls the registry assigns. A machine
 * whose hardware is down says nothing at all: finding that out is the detector's job.
 */
export class MachineAgents {
  private readonly byId = new Map<string, Machine>();
  /**
   * The trainers and the rollouts, in the order the machines were added; rebuilt when a machine joins,
   * leaves or changes role (a rollout lent to the trainer as warm standby). The pipeline asks for them on every completed sample: filtering the
   * whole roster each time made a step cost O(machines × samples).
   */
  private byRole: { trainers: Machine[]; rollouts: Machine[]; rolloutOrder: Map<Machine, number> } | null = null;

  constructor(
    private readonly k: ClusterEnvironment,
    private readonly s: Scenario,
    private readonly shape: JobShape,
    private readonly job: AgentsJob,
  ) {
    k.subscribe(['HeartbeatProbeRequested'], (m) => this.onProbe(m as MessageOf<'HeartbeatProbeRequested'>));
    k.subscribe(['WeightPullAssigned'], (m) => this.onPullAssigned(m as MessageOf<'WeightPullAssigned'>));
  }

  /** The job's initial machines: scheduled, their containers started, then each agent boots its role. */
  bringUp(): void {
    const s = this.s;
    for (let i = 0; i < s.cluster.trainerMachines; i++) this.addMachine(`trainer-${i}`, 'trainer', 0);
    for (let i = 0; i < s.cluster.rolloutMachines; i++) this.addMachine(`rollout-${i}`, 'rollout', this.shape.rolloutSlots);
    const up = (s.restart.machineSchedulingSeconds + s.restart.containerStartSeconds) * 1000;
    for (const m of this.machines.values()) this.k.after(up, () => this.bootProcess(m, 'startup'));
  }

  addMachine(id: string, role: 'trainer' | 'rollout', slots: number): Machine {
    const m: Machine = {
      id,
      role,
      alive: true,
      process: 'starting',
      epoch: 0,
      slots,
      running: new Set(),
      held: new Set(),
      heldChanges: 0,
      buckets: new Map(),
      completedInWindow: 0,
      phase: 'initializing',
      registered: false,
    };
    this.byId.set(id, m);
    this.byRole = null;
    return m;
  }

  /** The machines by id (read only: they join through `addMachine` and leave through `removeMachine`). */
  get machines(): ReadonlyMap<string, Machine> {
    return this.byId;
  }

  removeMachine(id: string): void {
    if (this.byId.delete(id)) this.byRole = null;
  }

  /** A rollout lent to the trainer group (warm standby): it stops serving, drops its rollout weights, and is a trainer from now on. */
  lendToTrainer(m: Machine, reason: string): void {
    m.role = 'trainer';
    m.slots = 0;
    m.process = 'starting';
    m.epoch++;
    m.held.clear();
    m.heldChanges++;
    m.buckets.clear();
    this.byRole = null;
    this.k.emit('MachineRoleChanged', { machineId: m.id, from: 'rollout', to: 'trainer', reason }, `agent/${m.id}`);
  }

  /** The agent registers (or re-registers) and its role process initialises; then it works. */
  bootProcess(m: Machine, why: BootReason): void {
    if (!m.alive) return;
    const r = this.s.restart;
    const epoch = ++m.epoch;
    m.process = 'initializing';
    if (!m.registered || why !== 'trainer-restart') {
      m.registered = true;
      this.k.emit(
        'MachineRegistered',
        {
          machineId: m.id,
          role: m.role,
          zone: 'sim-zone',
          hardwareClass: 'sim-gpu',
          gpus: this.s.cluster.gpusPerMachine,
          agentAddress: `sim://${m.id}`,
          dpRank: null,
          weightsAddress: `sim://${m.id}:13337`,
        },
        `agent/${m.id}`,
      );
    }
    this.reportPhase(m, 'initializing');
    const initSeconds =
      m.role === 'trainer'
        ? r.checkpointLoadSeconds + r.workerInitSeconds
        : r.engineStartSeconds + (why === 'task-restart' || why === 'startup' ? r.rolloutInitSeconds : 0);
    this.k.after(initSeconds * 1000, () => {
      if (m.epoch !== epoch || !m.alive) return;
      m.process = 'ready';
      if (m.role === 'trainer') this.job.trainerReady(m);
      else {
        this.reportPhase(m, 'idle');
        this.job.rolloutCanTakeMore(m, true);
      }
    });
  }

  reportPhase(m: Machine, phase: string): void {
    if (m.phase === phase || !m.alive) return;
    m.phase = phase;
    this.k.emit(
      'RolePhaseChanged',
      { machineId: m.id, role: m.role, phase: phase as never, step: this.job.trainerStep(), changedAt: new Date(this.k.now).toISOString() },
      `agent/${m.id}`,
    );
  }

  /** The trainer machines, in the order they were added. Shared: not to be changed by the caller. */
  trainers(): readonly Machine[] {
    return this.roles().trainers;
  }

  /** The rollout machines, in the order they were added. Shared: not to be changed by the caller. */
  rollouts(): readonly Machine[] {
    return this.roles().rollouts;
  }

  /** Each rollout's position in `rollouts()`. */
  rolloutOrder(): ReadonlyMap<Machine, number> {
    return this.roles().rolloutOrder;
  }

  private roles() {
    if (!this.byRole) {
      const all = [...this.byId.values()];
      const rollouts = all.filter((m) => m.role === 'rollout');
      this.byRole = { trainers: all.filter((m) => m.role === 'trainer'), rollouts, rolloutOrder: new Map(rollouts.map((m, i) => [m, i])) };
    }
    return this.byRole;
  }

  startTelemetry(): void {
    const period = this.s.telemetrySeconds * 1000;
    this.k.after(period, () => {
      if (this.job.finished()) return;
      const at = new Date(this.k.now).toISOString();
      for (const m of this.machines.values()) {
        if (!m.alive || !m.registered) continue;
        if (m.role === 'trainer') {
          this.k.emit(
            'GpuActivitySampled',
            { machineId: m.id, sampledAt: at, intervalSeconds: this.s.telemetrySeconds, tensorActive: m.phase === 'training' ? 0.8 : 0, source: 'emulated' },
            `agent/${m.id}`,
          );
        } else if (m.process === 'ready') {
          let awaiting = 0;
          for (const x of m.running) if (x.awaitingTool) awaiting++;
          const generating = m.running.size - awaiting;
          this.k.emit(
            'RolloutThroughputSampled',
            {
              machineId: m.id,
              rolloutId: m.id,
              sampledAt: at,
              windowSeconds: this.s.telemetrySeconds,
              tokensPerSecond: generating * this.s.rollout.tokensPerSecond,
              completedRequests: m.completedInWindow,
              inFlightRequests: m.running.size,
              awaitingTools: awaiting,
            },
            `agent/${m.id}`,
          );
          m.completedInWindow = 0;
        }
      }
      this.startTelemetry();
    });
  }

  private onProbe(m: MessageOf<'HeartbeatProbeRequested'>): void {
    const machine = this.machines.get(m.data.machineId);
    if (!machine || !machine.alive) return; // a dead machine's agent cannot answer
    this.k.after(5, () => {
      if (machine.alive)
        this.k.emit('HeartbeatAcked', { probeId: m.data.probeId, machineId: machine.id, ackedAt: new Date(this.k.now).toISOString() }, `agent/${machine.id}`);
    });
  }

  private onPullAssigned(m: MessageOf<'WeightPullAssigned'>): void {
    const d = m.data;
    const puller = this.machines.get(d.pullerId);
    const source = this.machines.get(d.sourceId);
    if (!puller || !source) return;
    const pullerEpoch = puller.epoch;
    const sourceEpoch = source.epoch;
    const ms = this.shape.pullSeconds * 1000;
    this.k.after(ms, () => {
      if (!puller.alive || puller.epoch !== pullerEpoch) return; // the puller died: the registry learns it from the verdict
      const sourceOk =
        (source.alive && source.epoch === sourceEpoch && source.held.has(d.version)) ||
        (source.alive && (source.buckets.get(d.version)?.has(d.bucketIndex) ?? false));
      if (!sourceOk) {
        this.k.emit(
          'WeightPullFailed',
          {
            pullId: d.pullId,
            version: d.version,
            bucketIndex: d.bucketIndex,
            pullerId: d.pullerId,
            sourceId: d.sourceId,
            reason: `source ${d.sourceId} unreachable`,
          },
          `agent/${puller.id}`,
        );
        return;
      }
      const got = puller.buckets.get(d.version) ?? new Set<number>();
      got.add(d.bucketIndex);
      puller.buckets.set(d.version, got);
      this.k.emit(
        'WeightPullCompleted',
        {
          pullId: d.pullId,
          version: d.version,
          bucketIndex: d.bucketIndex,
          pullerId: d.pullerId,
          sourceId: d.sourceId,
          bytes: this.shape.bucketBytes,
          durationMs: Math.round(ms),
        },
        `agent/${puller.id}`,
      );
      if (got.size === this.s.training.weightBuckets) {
        puller.held.add(d.version);
        puller.heldChanges++;
        puller.buckets.delete(d.version);
        this.job.rolloutCanTakeMore(puller, false);
      }
    });
  }
}
