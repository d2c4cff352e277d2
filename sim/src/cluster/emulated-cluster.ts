import type { MessageOf, RobustrlMessage } from '@robustrl/contracts';
import { SeededRandom } from '../random';
import type { RestartStageSeconds } from '../report/report-types';
import type { Scenario } from '../scenario';
import type { ClusterEnvironment } from './cluster-environment';

type StageName = RestartStageSeconds['stage'];
export type RestartKind = 'task-restart' | 'trainer-restart' | 'rollout-replacement';
export interface RestartRecord {
  kind: RestartKind;
  stages: Partial<Record<StageName, number>>;
}

interface Machine {
  id: string;
  role: 'trainer' | 'rollout';
  /** The hardware is up (a silent machine fault sets it false). */
  alive: boolean;
  /** The role process: ready = working; anything else = not serving. */
  process: 'starting' | 'initializing' | 'ready' | 'dead';
  /** Incarnation of the role process: actions scheduled by an older one are ignored. */
  epoch: number;
  slots: number;
  running: Set<Sample>;
  /** Weight versions held whole, and buckets of versions being pulled. */
  held: Set<number>;
  buckets: Map<number, Set<number>>;
  completedInWindow: number;
  phase: string;
  registered: boolean;
}

interface Sample {
  id: string;
  step: number;
  attempt: number;
  promptId: string;
  sampleIndex: number;
  turns: number;
  turnSeconds: number;
  toolSeconds: number[];
  turnsDone: number;
  owner: Machine | null;
  /** Bumped when the sample moves or is dropped: its scheduled turn ends become stale. */
  epoch: number;
  awaitingTool: boolean;
  done: boolean;
}

interface Batch {
  step: number;
  attempt: number;
  samples: Sample[];
  done: number;
  released: boolean;
}

/**
 * The emulated GPU cluster of one RL job: trainer and rollout machines with their agents, generating,
 * training and syncing weights on the virtual clock, and carrying out the control plane's commands.
 *
 * It only *acts* through messages, exactly like real agents: registrations, phases, telemetry, trajectory
 * turns, weight pulls, fault signals, heartbeat acks and command outcomes go out on the bus; verdicts,
 * recovery commands, pull assignments and trajectory reassignments come in from the real deciders.
 * Faults are injected here; detection and the choice of recovery are entirely the deciders'.
 *
 * Pipeline per mode (paper Fig. 1, §7.1): sync — generate the whole batch, train, sync weights, repeat;
 * semi-sync — training starts when half the batch is done and finishes after the last sample arrives;
 * async — batch k+1 is generated (one step off-policy) while step k trains.
 */
export class EmulatedCluster {
  readonly machines = new Map<string, Machine>();
  private readonly batches: Batch[] = [];
  private readonly waiting: Sample[] = [];
  private readonly rng: SeededRandom;
  private readonly faultRng: SeededRandom;
  private readonly B: number;
  private readonly bucketBytes: number;
  private readonly pullSeconds: number;
  /** weights version → the number of steps trained into it. */
  private readonly versionStep = new Map<number, number>();
  private latestVersion = 0;
  /** After a task restart rollouts hold nothing: they wait for a version at least this new. */
  private minVersion = 1;
  private nextMachine: number;
  private trainer = { busy: false, step: 0, epoch: 0, waitingForBatch: false, startedAt: 0 };
  stepsDone = 0;
  finishedAt: number | null = null;
  restarts: RestartRecord[] = [];
  faultsInjected = 0;
  private lastCycleStart: number;
  private lastCycleMs = 0;
  private readonly trainStartFraction: number;

  constructor(
    private readonly k: ClusterEnvironment,
    private readonly s: Scenario,
    seed: number,
    private readonly injectFaults: boolean,
  ) {
    const root = new SeededRandom(seed);
    this.rng = root.fork('workload');
    this.faultRng = root.fork('faults');
    this.B = s.batch.prompts * s.batch.responsesPerPrompt;
    const totalBytes = Math.round(s.model.parametersBillions * 1e9 * 2);
    this.bucketBytes = Math.ceil(totalBytes / s.training.weightBuckets);
    this.pullSeconds = this.bucketBytes / (s.training.weightLinkGBps * 1e9);
    this.trainStartFraction = s.mode === 'semi-sync' ? (s.trainStartFraction ?? 0.5) : 1;
    this.nextMachine = s.cluster.rolloutMachines;
    this.lastCycleStart = k.now;

    k.subscribe(['HeartbeatProbeRequested'], (m) => this.onProbe(m as MessageOf<'HeartbeatProbeRequested'>));
    k.subscribe(['WeightPullAssigned'], (m) => this.onPullAssigned(m as MessageOf<'WeightPullAssigned'>));
    k.subscribe(['TrajectoriesReassigned'], (m) => this.onReassigned(m as MessageOf<'TrajectoriesReassigned'>));
    k.subscribe(['RestartTrainerGroup', 'ReplaceMachine', 'RestartTask', 'PromoteRolloutToTrainer'], (m) => this.onCommand(m));
    k.subscribe(['FaultConfirmed'], (m) => this.onConfirmed(m as MessageOf<'FaultConfirmed'>));
  }

  // ── start-up ─────────────────────────────────────────────────────────────────────────────────
  start(): void {
    const s = this.s;
    this.k.emit('JobStarted', { mode: s.mode, resumedFromStep: null, trainerMachines: s.cluster.trainerMachines, rolloutMachines: s.cluster.rolloutMachines, detection: s.detection }, 'sim/job');
    const slots = Math.ceil(this.B / s.cluster.rolloutMachines);
    for (let i = 0; i < s.cluster.trainerMachines; i++) this.addMachine(`trainer-${i}`, 'trainer', 0);
    for (let i = 0; i < s.cluster.rolloutMachines; i++) this.addMachine(`rollout-${i}`, 'rollout', slots);
    const up = (s.restart.machineSchedulingSeconds + s.restart.containerStartSeconds) * 1000;
    for (const m of this.machines.values()) this.k.after(up, () => this.bootProcess(m, 'startup'));
    this.releaseBatch(0);
    this.scheduleTelemetry();
    if (this.injectFaults) {
      this.planTrainerFaults();
      this.scheduleRolloutFaults();
    }
  }

  private addMachine(id: string, role: 'trainer' | 'rollout', slots: number): Machine {
    const m: Machine = { id, role, alive: true, process: 'starting', epoch: 0, slots, running: new Set(), held: new Set(), buckets: new Map(), completedInWindow: 0, phase: 'initializing', registered: false };
    this.machines.set(id, m);
    return m;
  }

  /** The agent registers (or re-registers) and its role process initialises; then it works. */
  private bootProcess(m: Machine, why: 'startup' | 'task-restart' | 'trainer-restart' | 'replacement'): void {
    if (!m.alive) return;
    const r = this.s.restart;
    const epoch = ++m.epoch;
    m.process = 'initializing';
    if (!m.registered || why !== 'trainer-restart') {
      m.registered = true;
      this.k.emit('MachineRegistered', { machineId: m.id, role: m.role, zone: 'sim-zone', hardwareClass: 'sim-gpu', gpus: this.s.cluster.gpusPerMachine, agentAddress: `sim://${m.id}`, dpRank: null, weightsAddress: `sim://${m.id}:13337` }, `agent/${m.id}`);
    }
    this.phase(m, 'initializing');
    const initSeconds = m.role === 'trainer'
      ? r.checkpointLoadSeconds + r.workerInitSeconds
      : r.engineStartSeconds + (why === 'task-restart' || why === 'startup' ? r.rolloutInitSeconds : 0);
    this.k.after(initSeconds * 1000, () => {
      if (m.epoch !== epoch || !m.alive) return;
      m.process = 'ready';
      if (m.role === 'trainer') this.trainerReady(m);
      else {
        this.phase(m, 'idle');
        this.dispatch();
      }
    });
  }

  private phase(m: Machine, phase: string): void {
    if (m.phase === phase || !m.alive) return;
    m.phase = phase;
    this.k.emit('RolePhaseChanged', { machineId: m.id, role: m.role, phase: phase as never, step: this.trainer.step, changedAt: new Date(this.k.now).toISOString() }, `agent/${m.id}`);
  }

  private trainers(): Machine[] {
    return [...this.machines.values()].filter((m) => m.role === 'trainer');
  }

  private rollouts(): Machine[] {
    return [...this.machines.values()].filter((m) => m.role === 'rollout');
  }

  // ── trainer ──────────────────────────────────────────────────────────────────────────────────
  private trainerReady(m: Machine): void {
    // Every trainer rank must be up before the group trains.
    if (!this.trainers().every((t) => t.process === 'ready')) return this.phase(m, 'idle');
    for (const t of this.trainers()) this.phase(t, 'idle');
    // Weights the rollouts can use: publish (again) unless every living rollout holds the latest.
    const latestStep = this.versionStep.get(this.latestVersion);
    const rolloutsHold = this.latestVersion >= this.minVersion && this.rollouts().every((r) => !r.alive || r.held.has(this.latestVersion));
    if (latestStep !== this.stepsDone || !rolloutsHold) this.publishWeights();
    this.maybeTrain();
  }

  private publishWeights(): void {
    const version = ++this.latestVersion;
    this.versionStep.set(version, this.stepsDone);
    const buckets = Array.from({ length: this.s.training.weightBuckets }, (_, index) => ({ index, sizeBytes: this.bucketBytes, checksum: `sim:${version}:${index}` }));
    const sources = this.trainers().map((t) => ({ instanceId: t.id, address: `sim://${t.id}:13337` }));
    for (const t of this.trainers()) t.held.add(version);
    this.k.emit('WeightVersionPublished', { version, step: this.stepsDone, buckets, totalBytes: this.bucketBytes * buckets.length, sources }, `agent/${this.trainers()[0].id}`);
    // The batch of the coming step goes out with its weights (async: only at the start and after a task
    // restart; otherwise each batch follows the previous one's generation, see complete()).
    this.releaseBatch(this.stepsDone);
    this.dispatch();
  }

  private maybeTrain(): void {
    const t = this.trainer;
    if (t.busy || this.finishedAt !== null) return;
    if (!this.trainers().every((m) => m.process === 'ready')) return;
    const batch = this.batches[t.step];
    if (!batch || !batch.released) return;
    const need = Math.max(1, Math.ceil(this.trainStartFraction * this.B));
    if (batch.done < need) return;
    t.busy = true;
    t.waitingForBatch = false;
    t.startedAt = this.k.now;
    const epoch = ++t.epoch;
    for (const m of this.trainers()) this.phase(m, 'training');
    this.k.emit('TrainingStepStarted', { step: t.step, batchId: batchId(batch), startedAt: new Date(this.k.now).toISOString() }, 'sim/trainer');
    this.k.after(this.s.training.stepSeconds * 1000, () => this.trainingComputed(epoch));
  }

  /** The step's compute on what had arrived is done; it finishes once the whole batch is in (semi-sync's tail). */
  private trainingComputed(epoch: number): void {
    const t = this.trainer;
    if (t.epoch !== epoch) return;
    const batch = this.batches[t.step];
    if (batch.done < this.B) {
      t.waitingForBatch = true;
      for (const m of this.trainers()) this.phase(m, 'idle');
      return;
    }
    this.finishStep(epoch);
  }

  private finishStep(epoch: number): void {
    const t = this.trainer;
    const ckpt = this.s.training.checkpointBlockingSeconds * 1000;
    for (const m of this.trainers()) this.phase(m, 'checkpoint');
    this.k.after(ckpt, () => {
      if (t.epoch !== epoch) return;
      const step = t.step;
      const batch = this.batches[step];
      this.k.emit('CheckpointSaved', { step, uri: `sim://checkpoints/step-${step}`, blockingMs: Math.round(ckpt) }, 'sim/trainer');
      this.k.emit('TrainingStepCompleted', { step, batchId: batchId(batch), durationMs: Math.round(this.k.now - t.startedAt) }, 'sim/trainer');
      this.stepsDone = step + 1;
      t.step = step + 1;
      t.busy = false;
      this.lastCycleMs = this.k.now - this.lastCycleStart;
      this.lastCycleStart = this.k.now;
      const plan = this.trainerFaultPlan.get(this.stepsDone);
      if (plan !== undefined) this.k.after(plan * Math.max(1, this.lastCycleMs), () => this.killTrainers(plan));
      if (this.stepsDone >= this.s.steps) {
        this.finishedAt = this.k.now;
        for (const m of this.machines.values()) this.phase(m, 'idle');
        return;
      }
      for (const m of this.trainers()) this.phase(m, 'weight-update');
      this.publishWeights();
      for (const m of this.trainers()) this.phase(m, 'idle');
      this.maybeTrain();
    });
  }

  // ── rollouts ─────────────────────────────────────────────────────────────────────────────────
  /** The weights a batch is generated with: its step's (sync/semi-sync) or one step older (async). */
  private requiredStep(step: number): number {
    return this.s.mode === 'async' ? Math.max(0, step - 1) : step;
  }

  /** Queues the samples of a step's batch, once per attempt (a task restart makes a new attempt). */
  private releaseBatch(step: number): void {
    if (step >= this.s.steps || this.batches[step]) return;
    const attempt = this.attempts.get(step) ?? 0;
    const samples: Sample[] = [];
    const r = this.s.rollout;
    for (let p = 0; p < this.s.batch.prompts; p++) {
      for (let i = 0; i < this.s.batch.responsesPerPrompt; i++) {
        const turns = this.rng.int(r.turns.min, r.turns.max);
        const total = Math.min(r.responseSeconds.max, this.rng.logNormal(r.responseSeconds.median, r.responseSeconds.sigma));
        const toolSeconds = Array.from({ length: turns - 1 }, () => (r.toolSeconds.median > 0 ? this.rng.logNormal(r.toolSeconds.median, r.toolSeconds.sigma) : 0));
        samples.push({ id: `s${step}.${attempt}/p${p}/${i}`, step, attempt, promptId: `s${step}-p${p}`, sampleIndex: i, turns, turnSeconds: total / turns, toolSeconds, turnsDone: 0, owner: null, epoch: 0, awaitingTool: false, done: false });
      }
    }
    const batch: Batch = { step, attempt, samples, done: 0, released: true };
    this.batches[step] = batch;
    this.waiting.push(...samples);
    this.dispatch();
  }

  /** The newest weights (in steps trained) a machine holds whole, of the versions still usable. */
  private weightsStepOf(m: Machine): number {
    let best = -1;
    for (const v of m.held) if (v >= this.minVersion) best = Math.max(best, this.versionStep.get(v) ?? -1);
    return best;
  }

  /** Hands waiting samples, oldest first, to the least loaded rollouts that hold the weights for them. */
  private dispatch(): void {
    if (this.waiting.length === 0) return;
    const free = this.rollouts()
      .filter((m) => m.alive && m.process === 'ready' && m.running.size < m.slots)
      .map((m) => ({ m, weights: this.weightsStepOf(m) }));
    if (free.length === 0) return;
    const keep: Sample[] = [];
    let i = 0;
    for (; i < this.waiting.length && free.length > 0; i++) {
      const sample = this.waiting[i];
      if (sample.done || this.batches[sample.step]?.attempt !== sample.attempt) continue;
      const need = this.requiredStep(sample.step);
      let best = -1;
      for (let j = 0; j < free.length; j++) if (free[j].weights >= need && (best < 0 || free[j].m.running.size < free[best].m.running.size)) best = j;
      if (best < 0) {
        keep.push(sample);
        continue;
      }
      const m = free[best].m;
      this.startOn(sample, m);
      if (m.running.size >= m.slots) free.splice(best, 1);
    }
    keep.push(...this.waiting.slice(i));
    this.waiting.length = 0;
    this.waiting.push(...keep);
  }

  private startOn(sample: Sample, m: Machine): void {
    sample.owner = m;
    sample.epoch++;
    m.running.add(sample);
    this.phase(m, 'rollout');
    this.scheduleTurn(sample);
  }

  private scheduleTurn(sample: Sample): void {
    const epoch = sample.epoch;
    sample.awaitingTool = false;
    this.k.after(sample.turnSeconds * 1000, () => {
      if (sample.epoch !== epoch || !sample.owner) return;
      const m = sample.owner;
      this.k.emit('TrajectoryTurnAppended', {
        trajectoryId: sample.id, batchId: `b${sample.step}.${sample.attempt}`, step: sample.step, promptId: sample.promptId, sampleIndex: sample.sampleIndex,
        turnId: `${sample.id}/t${sample.turnsDone}`, turnIndex: sample.turnsDone, kind: 'model-output', rolloutId: m.id,
        weightVersion: this.latestVersion, tokens: Math.round(sample.turnSeconds * this.s.rollout.tokensPerSecond),
      }, `agent/${m.id}`);
      sample.turnsDone++;
      if (sample.turnsDone >= sample.turns) return this.complete(sample);
      sample.awaitingTool = true;
      this.k.after(sample.toolSeconds[sample.turnsDone - 1] * 1000, () => {
        if (sample.epoch !== epoch || sample.owner !== m) return;
        this.scheduleTurn(sample);
      });
    });
  }

  private complete(sample: Sample): void {
    const m = sample.owner!;
    m.running.delete(sample);
    m.completedInWindow++;
    sample.done = true;
    sample.owner = null;
    this.k.emit('TrajectoryStatusChanged', { trajectoryId: sample.id, batchId: `b${sample.step}.${sample.attempt}`, step: sample.step, promptId: sample.promptId, sampleIndex: sample.sampleIndex, status: 'completed' }, `agent/${m.id}`);
    const batch = this.batches[sample.step];
    if (batch && batch.attempt === sample.attempt) {
      batch.done++;
      if (batch.done === this.B) {
        if (this.s.mode === 'async') this.releaseBatch(sample.step + 1);
        if (this.trainer.waitingForBatch && this.trainer.step === sample.step) {
          // Semi-sync: the last samples arrived; train on them (an eighth of a step) and finish.
          const epoch = this.trainer.epoch;
          this.trainer.waitingForBatch = false;
          for (const t of this.trainers()) this.phase(t, 'training');
          this.k.after((this.s.training.stepSeconds / 8) * 1000, () => {
            if (this.trainer.epoch === epoch) this.finishStep(epoch);
          });
        }
      }
    }
    if (m.running.size === 0) this.phase(m, 'idle');
    this.maybeTrain();
    this.dispatch();
  }

  // ── weights ──────────────────────────────────────────────────────────────────────────────────
  private onPullAssigned(m: MessageOf<'WeightPullAssigned'>): void {
    const d = m.data;
    const puller = this.machines.get(d.pullerId);
    const source = this.machines.get(d.sourceId);
    if (!puller || !source) return;
    const pullerEpoch = puller.epoch;
    const sourceEpoch = source.epoch;
    const ms = this.pullSeconds * 1000;
    this.k.after(ms, () => {
      if (!puller.alive || puller.epoch !== pullerEpoch) return; // the puller died: the registry learns it from the verdict
      const sourceOk = source.alive && source.epoch === sourceEpoch && source.held.has(d.version) || (source.alive && (source.buckets.get(d.version)?.has(d.bucketIndex) ?? false));
      if (!sourceOk) {
        this.k.emit('WeightPullFailed', { pullId: d.pullId, version: d.version, bucketIndex: d.bucketIndex, pullerId: d.pullerId, sourceId: d.sourceId, reason: `source ${d.sourceId} unreachable` }, `agent/${puller.id}`);
        return;
      }
      const got = puller.buckets.get(d.version) ?? new Set<number>();
      got.add(d.bucketIndex);
      puller.buckets.set(d.version, got);
      this.k.emit('WeightPullCompleted', { pullId: d.pullId, version: d.version, bucketIndex: d.bucketIndex, pullerId: d.pullerId, sourceId: d.sourceId, bytes: this.bucketBytes, durationMs: Math.round(ms) }, `agent/${puller.id}`);
      if (got.size === this.s.training.weightBuckets) {
        puller.held.add(d.version);
        puller.buckets.delete(d.version);
        this.dispatch();
      }
    });
  }

  // ── telemetry and liveness ───────────────────────────────────────────────────────────────────
  private scheduleTelemetry(): void {
    const period = this.s.telemetrySeconds * 1000;
    this.k.after(period, () => {
      if (this.finishedAt !== null) return;
      const at = new Date(this.k.now).toISOString();
      for (const m of this.machines.values()) {
        if (!m.alive || !m.registered) continue;
        if (m.role === 'trainer') {
          this.k.emit('GpuActivitySampled', { machineId: m.id, sampledAt: at, intervalSeconds: this.s.telemetrySeconds, tensorActive: m.phase === 'training' ? 0.8 : 0, source: 'emulated' }, `agent/${m.id}`);
        } else if (m.process === 'ready') {
          let awaiting = 0;
          for (const x of m.running) if (x.awaitingTool) awaiting++;
          const generating = m.running.size - awaiting;
          this.k.emit('RolloutThroughputSampled', {
            machineId: m.id, rolloutId: m.id, sampledAt: at, windowSeconds: this.s.telemetrySeconds,
            tokensPerSecond: generating * this.s.rollout.tokensPerSecond, completedRequests: m.completedInWindow, inFlightRequests: m.running.size, awaitingTools: awaiting,
          }, `agent/${m.id}`);
          m.completedInWindow = 0;
        }
      }
      this.scheduleTelemetry();
    });
  }

  private onProbe(m: MessageOf<'HeartbeatProbeRequested'>): void {
    const machine = this.machines.get(m.data.machineId);
    if (!machine || !machine.alive) return; // a dead machine's agent cannot answer
    this.k.after(5, () => {
      if (machine.alive) this.k.emit('HeartbeatAcked', { probeId: m.data.probeId, machineId: machine.id, ackedAt: new Date(this.k.now).toISOString() }, `agent/${machine.id}`);
    });
  }

  // ── fault injection ──────────────────────────────────────────────────────────────────────────
  /**
   * Paper §7.1: a trainer fault at a random time within every 10% of the steps, by killing all trainers.
   * Drawn up front from the fault stream: per window of steps, one step of the window and a point within
   * that step's cycle (the previous cycle's length scales it). Step 0 is left alone: a fault in the first
   * iteration restarts the task by rule (paper §5.1.2) whatever the strategy.
   */
  private readonly trainerFaultPlan = new Map<number, number>();
  private planTrainerFaults(): void {
    const every = this.s.faults.trainerEveryStepsFraction;
    if (every === null) return;
    const window = Math.max(1, Math.round(this.s.steps * every));
    for (let first = 0; first < this.s.steps; first += window) {
      const lo = Math.max(1, first);
      const hi = Math.min(this.s.steps - 1, first + window - 1);
      if (lo > hi) continue;
      this.trainerFaultPlan.set(this.faultRng.int(lo, hi), this.faultRng.next());
    }
  }

  /** The step of the last trainer fault: a second one in the same step would be a different experiment (rule 2 escalates it). */
  private lastTrainerFaultStep = -1;

  private killTrainers(phase: number): void {
    if (this.finishedAt !== null) return;
    if (this.lastTrainerFaultStep === this.trainer.step) {
      // Its window's step ran long and this draw landed in a step that already had its fault: move it on.
      this.trainerFaultPlan.set(this.stepsDone + 1, phase);
      return;
    }
    this.lastTrainerFaultStep = this.trainer.step;
    this.faultsInjected++;
    for (const m of this.trainers()) {
      if (!m.alive || m.process === 'dead') continue;
      m.process = 'dead';
      m.epoch++;
      this.k.emit('AgentFaultSignalled', { machineId: m.id, role: 'trainer', signal: 'process-exited', detail: 'trainer process killed (fault injection)', exitCode: 137, observedAt: new Date(this.k.now).toISOString() }, `agent/${m.id}`);
    }
    // The step in progress is lost (its batch is kept: rollouts and their results survive the trainer).
    this.trainer.epoch++;
    this.trainer.busy = false;
    this.trainer.waitingForBatch = false;
  }

  private scheduleRolloutFaults(): void {
    const rate = this.s.faults.rolloutFaultsPerMachineHour;
    if (rate <= 0) return;
    const arm = (m: Machine) => {
      const ms = this.faultRng.exponential(3_600_000 / rate);
      this.k.after(ms, () => {
        if (this.finishedAt !== null || !m.alive || m.process !== 'ready' || !this.machines.has(m.id)) return;
        this.faultsInjected++;
        // A silent machine failure: no signal, no telemetry, no probe answers — the detector must find it.
        m.alive = false;
        m.process = 'dead';
        m.epoch++;
        for (const x of m.running) x.epoch++;
      });
    };
    for (const m of this.rollouts()) arm(m);
    this.armRolloutFault = arm;
  }
  private armRolloutFault: ((m: Machine) => void) | null = null;

  // ── recovery commands ────────────────────────────────────────────────────────────────────────
  private onConfirmed(m: MessageOf<'FaultConfirmed'>): void {
    const machine = this.machines.get(m.data.machineId);
    if (!machine || machine.role !== 'rollout' || machine.alive) return;
    // After the rollout manager has moved what it knows of (its reassignment follows this verdict on
    // the bus), the router re-sends requests that had stored no turn yet: they start over elsewhere.
    this.k.after(0, () => {
      for (const x of [...machine.running]) {
        machine.running.delete(x);
        x.owner = null;
        x.epoch++;
        // Not moved by the rollout manager (no stored turn, or nowhere to go then): retried from what it has.
        this.waiting.push(x);
      }
      this.dispatch();
    });
  }

  private onReassigned(m: MessageOf<'TrajectoriesReassigned'>): void {
    for (const a of m.data.assignments) {
      const target = this.machines.get(a.toRolloutId);
      let sample: Sample | undefined;
      const from = this.machines.get(m.data.fromRolloutId);
      for (const x of from?.running ?? []) if (x.id === a.trajectoryId) sample = x;
      sample ??= this.findSample(a.trajectoryId);
      if (!sample || sample.done) continue;
      from?.running.delete(sample);
      sample.owner = null;
      sample.epoch++;
      sample.turnsDone = Math.min(sample.turnsDone, a.resumeFromTurn); // the preserved prefix
      if (target && target.alive && target.process === 'ready') this.startOn(sample, target);
      else this.waiting.push(sample);
    }
    this.dispatch();
  }

  private findSample(id: string): Sample | undefined {
    for (const b of this.batches) for (const x of b?.samples ?? []) if (x.id === id) return x;
    return undefined;
  }

  private onCommand(message: RobustrlMessage): void {
    switch (message.type) {
      case 'RestartTrainerGroup':
        return this.restartTrainerGroup(message as MessageOf<'RestartTrainerGroup'>);
      case 'ReplaceMachine':
        return this.replaceMachine(message as MessageOf<'ReplaceMachine'>);
      case 'RestartTask':
        return this.restartTask(message as MessageOf<'RestartTask'>);
      case 'PromoteRolloutToTrainer': {
        const d = (message as MessageOf<'PromoteRolloutToTrainer'>).data;
        // Trainer machines never fail as hardware in these scenarios (faults kill processes), so no
        // warm standby is needed; say so instead of pretending.
        this.k.emit('RecoveryCommandFailed', { recoveryId: d.recoveryId, commandId: d.commandId, machineId: d.rolloutMachineId, executor: 'sim/orchestrator', durationMs: 0, error: 'warm standby promotion is not modelled by the simulator' }, 'sim/orchestrator');
        return;
      }
    }
  }

  private restartTrainerGroup(c: MessageOf<'RestartTrainerGroup'>): void {
    const r = this.s.restart;
    this.restarts.push({ kind: 'trainer-restart', stages: { teardown: r.trainerTeardownSeconds, 'checkpoint-load': r.checkpointLoadSeconds, 'worker-init': r.workerInitSeconds } });
    for (const id of c.data.machines) {
      const m = this.machines.get(id);
      if (!m) continue;
      m.process = 'starting';
      m.epoch++;
      this.k.after(r.trainerTeardownSeconds * 1000, () => {
        this.k.emit('RecoveryCommandSucceeded', { recoveryId: c.data.recoveryId, commandId: c.data.commandId, machineId: id, executor: `agent/${id}`, durationMs: Math.round(r.trainerTeardownSeconds * 1000) }, `agent/${id}`);
        this.bootProcess(m, 'trainer-restart');
      });
    }
  }

  private replaceMachine(c: MessageOf<'ReplaceMachine'>): void {
    const r = this.s.restart;
    const old = this.machines.get(c.data.machineId);
    const seconds = r.machineSchedulingSeconds + r.containerStartSeconds;
    this.restarts.push({ kind: 'rollout-replacement', stages: { 'machine-scheduling': r.machineSchedulingSeconds, 'container-start': r.containerStartSeconds, 'engine-start': r.engineStartSeconds, 'weight-sync': this.pullSeconds * this.s.training.weightBuckets } });
    if (old) {
      old.alive = false;
      old.process = 'dead';
      this.k.emit('MachineDeregistered', { machineId: old.id, reason: `replaced (${c.data.recoveryId})` }, 'sim/orchestrator');
      this.machines.delete(old.id);
    }
    const role = c.data.role === 'rollout' ? 'rollout' : 'trainer';
    const id = `${role}-${this.nextMachine++}`;
    this.k.after(seconds * 1000, () => {
      const m = this.addMachine(id, role, role === 'rollout' ? Math.ceil(this.B / this.s.cluster.rolloutMachines) : 0);
      this.k.emit('RecoveryCommandSucceeded', { recoveryId: c.data.recoveryId, commandId: c.data.commandId, machineId: null, executor: 'sim/orchestrator', durationMs: Math.round(seconds * 1000), newMachineId: id }, 'sim/orchestrator');
      this.bootProcess(m, 'replacement');
      if (role === 'rollout') this.armRolloutFault?.(m);
    });
  }

  /** In place (paper §7.1: ByteRobust's in-place restart, no rescheduling): every process restarts; in-flight rollouts are lost. */
  private restartTask(c: MessageOf<'RestartTask'>): void {
    const r = this.s.restart;
    this.restarts.push({ kind: 'task-restart', stages: { 'container-start': r.instanceRestartSeconds, 'engine-start': r.engineStartSeconds, 'rollout-init': r.rolloutInitSeconds, 'checkpoint-load': r.checkpointLoadSeconds, 'worker-init': r.workerInitSeconds, 'weight-sync': this.pullSeconds * this.s.training.weightBuckets } });
    this.trainer.epoch++;
    this.trainer.busy = false;
    this.trainer.waitingForBatch = false;
    // Everything generated for unfinished steps is gone: the task starts again from its checkpoint.
    for (const b of this.batches) {
      if (!b || b.step < this.stepsDone) continue;
      for (const x of b.samples) {
        x.epoch++;
        if (x.owner) x.owner.running.delete(x);
        if (!x.done && x.turnsDone > 0) {
          this.k.emit('TrajectoryStatusChanged', { trajectoryId: x.id, batchId: `b${x.step}.${x.attempt}`, step: x.step, promptId: x.promptId, sampleIndex: x.sampleIndex, status: 'aborted' }, 'sim/job');
        }
        x.owner = null;
      }
    }
    this.batches.forEach((b, st) => {
      if (!b || st < this.stepsDone) return;
      delete this.batches[st];
      this.attempts.set(st, (this.attempts.get(st) ?? 0) + 1);
    });
    this.waiting.length = 0;
    this.minVersion = this.latestVersion + 1;
    const up = r.instanceRestartSeconds * 1000;
    for (const m of this.machines.values()) {
      m.process = 'starting';
      m.epoch++;
      m.running.clear();
      m.held.clear();
      m.buckets.clear();
      const wasDead = !m.alive;
      m.alive = true;
      // A machine whose hardware had failed comes back through the scheduler as well.
      this.k.after(up + (wasDead ? r.machineSchedulingSeconds * 1000 : 0), () => this.bootProcess(m, 'task-restart'));
      if (wasDead && m.role === 'rollout') this.armRolloutFault?.(m);
    }
    this.k.after(up, () => {
      this.k.emit('RecoveryCommandSucceeded', { recoveryId: c.data.recoveryId, commandId: c.data.commandId, machineId: null, executor: 'sim/orchestrator', durationMs: Math.round(up) }, 'sim/orchestrator');
    });
    // The current step's batch goes out again with the first weights published after the restart.
  }

  private attempts = new Map<number, number>();
}

function batchId(b: Batch): string {
  return `b${b.step}.${b.attempt}`;
}
