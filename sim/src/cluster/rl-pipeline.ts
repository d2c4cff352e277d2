import type { MessageOf } from '@robustrl/contracts';
import type { SeededRandom } from '../random';
import type { Scenario } from '../scenario';
import type { ClusterEnvironment } from './cluster-environment';
import { Batch, batchId, JobShape, Machine, Sample } from './cluster-model';
import type { MachineAgents } from './machine-agents';
import { WaitingSamples } from './waiting-samples';

/**
 * The RL job itself: batches of samples generated on the rollouts, trained on the trainers, checkpointed,
 * and the new weights published for the next batch.
 *
 * Pipeline per mode (paper Fig. 1, §7.1): sync — generate the whole batch, train, sync weights, repeat;
 * semi-sync — training starts when half the batch is done and finishes after the last sample arrives;
 * async — batch k+1 is generated (one step off-policy) while step k trains.
 */
export class RlPipeline {
  private readonly batches: Batch[] = [];
  private readonly waiting = new WaitingSamples();
  /**
   * Rollouts that may have a free slot: every rollout that has one is in here (added when it comes up
   * or a sample leaves it; dropped by dispatch once it has none), so a dispatch looks at those, not at
   * every rollout — it runs once per completed sample.
   */
  private readonly mayTakeMore = new Set<Machine>();
  /** weights version → the number of steps trained into it. */
  private readonly versionStep = new Map<number, number>();
  private latestVersion = 0;
  /** After a task restart rollouts hold nothing: they wait for a version at least this new. */
  private minVersion = 1;
  private trainer = { busy: false, step: 0, epoch: 0, waitingForBatch: false, startedAt: 0 };
  private attempts = new Map<number, number>();
  private readonly B: number;
  private readonly trainStartFraction: number;
  stepsDone = 0;
  finishedAt: number | null = null;

  constructor(
    private readonly k: ClusterEnvironment,
    private readonly s: Scenario,
    private readonly shape: JobShape,
    private readonly rng: SeededRandom,
    private readonly agents: MachineAgents,
    /** Told as each step's checkpoint lands, before the job decides whether it is over. */
    private readonly stepFinished: (stepsDone: number) => void,
  ) {
    this.B = shape.batchSize;
    this.trainStartFraction = s.mode === 'semi-sync' ? (s.trainStartFraction ?? 0.5) : 1;
    k.subscribe(['TrajectoriesReassigned'], (m) => this.onReassigned(m as MessageOf<'TrajectoriesReassigned'>));
    k.subscribe(['FaultConfirmed'], (m) => this.onConfirmed(m as MessageOf<'FaultConfirmed'>));
    k.subscribe(['WeightVersionRetired'], (m) => this.onRetired((m as MessageOf<'WeightVersionRetired'>).data.version));
  }

  get trainerStep(): number {
    return this.trainer.step;
  }

  announce(): void {
    const s = this.s;
    this.k.emit(
      'JobStarted',
      { mode: s.mode, resumedFromStep: null, trainerMachines: s.cluster.trainerMachines, rolloutMachines: s.cluster.rolloutMachines, detection: s.detection },
      'sim/job',
    );
  }

  // ── trainer ──────────────────────────────────────────────────────────────────────────────────
  trainerReady(m: Machine): void {
    // Every trainer rank must be up before the group trains.
    if (!this.agents.trainers().every((t) => t.process === 'ready')) return this.agents.reportPhase(m, 'idle');
    for (const t of this.agents.trainers()) this.agents.reportPhase(t, 'idle');
    // Weights the rollouts can use: publish (again) unless every living rollout holds the latest.
    const latestStep = this.versionStep.get(this.latestVersion);
    const rolloutsHold = this.latestVersion >= this.minVersion && this.agents.rollouts().every((r) => !r.alive || r.held.has(this.latestVersion));
    if (latestStep !== this.stepsDone || !rolloutsHold || this.latestRetired) this.publishWeights();
    this.maybeTrain();
  }

  /**
   * The registry retired the newest version: the trainer had released it to its relays and every relay
   * holding it is gone, so no machine can pull it. The trainer still has those weights in its own
   * memory: it publishes them again (at once if its group is up, else when it is), or the rollouts that
   * join next would wait for a version nobody serves.
   */
  private onRetired(version: number): void {
    if (version !== this.latestVersion || this.finishedAt !== null) return;
    this.latestRetired = true;
    if (this.agents.trainers().every((t) => t.process === 'ready')) this.publishWeights();
  }
  private latestRetired = false;

  private publishWeights(): void {
    this.latestRetired = false;
    const version = ++this.latestVersion;
    this.versionStep.set(version, this.stepsDone);
    const buckets = Array.from({ length: this.s.training.weightBuckets }, (_, index) => ({
      index,
      sizeBytes: this.shape.bucketBytes,
      checksum: `sim:${version}:${index}`,
    }));
    const sources = this.agents.trainers().map((t) => ({ instanceId: t.id, address: `sim://${t.id}:13337` }));
    for (const t of this.agents.trainers()) {
      t.held.add(version);
      t.heldChanges++;
    }
    this.k.emit(
      'WeightVersionPublished',
      { version, step: this.stepsDone, buckets, totalBytes: this.shape.bucketBytes * buckets.length, sources },
      `agent/${this.agents.trainers()[0].id}`,
    );
    // The batch of the coming step goes out with its weights (async: only at the start and after a task
    // restart; otherwise each batch follows the previous one's generation, see complete()).
    this.releaseBatch(this.stepsDone);
    this.dispatch();
  }

  private maybeTrain(): void {
    const t = this.trainer;
    if (t.busy || this.finishedAt !== null) return;
    // The batch first: it is the cheap test, and the one that fails on almost every completed sample.
    const batch = this.batches[t.step];
    if (!batch || !batch.released) return;
    const need = Math.max(1, Math.ceil(this.trainStartFraction * this.B));
    if (batch.done < need) return;
    if (!this.agents.trainers().every((m) => m.process === 'ready')) return;
    t.busy = true;
    t.waitingForBatch = false;
    t.startedAt = this.k.now;
    const epoch = ++t.epoch;
    for (const m of this.agents.trainers()) this.agents.reportPhase(m, 'training');
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
      for (const m of this.agents.trainers()) this.agents.reportPhase(m, 'idle');
      return;
    }
    this.finishStep(epoch);
  }

  private finishStep(epoch: number): void {
    const t = this.trainer;
    const ckpt = this.s.training.checkpointBlockingSeconds * 1000;
    for (const m of this.agents.trainers()) this.agents.reportPhase(m, 'checkpoint');
    this.k.after(ckpt, () => {
      if (t.epoch !== epoch) return;
      const step = t.step;
      const batch = this.batches[step];
      this.k.emit('CheckpointSaved', { step, uri: `sim://checkpoints/step-${step}`, blockingMs: Math.round(ckpt) }, 'sim/trainer');
      this.k.emit('TrainingStepCompleted', { step, batchId: batchId(batch), durationMs: Math.round(this.k.now - t.startedAt) }, 'sim/trainer');
      this.stepsDone = step + 1;
      t.step = step + 1;
      t.busy = false;
      this.stepFinished(this.stepsDone);
      if (this.stepsDone >= this.s.steps) {
        this.finishedAt = this.k.now;
        for (const m of this.agents.machines.values()) this.agents.reportPhase(m, 'idle');
        return;
      }
      for (const m of this.agents.trainers()) this.agents.reportPhase(m, 'weight-update');
      this.publishWeights();
      for (const m of this.agents.trainers()) this.agents.reportPhase(m, 'idle');
      this.maybeTrain();
    });
  }

  /** The step in progress is lost; its batch is kept (rollouts and their results survive the trainer). */
  abandonStep(): void {
    this.trainer.epoch++;
    this.trainer.busy = false;
    this.trainer.waitingForBatch = false;
  }

  /** A task restart: everything generated for unfinished steps is gone, the task starts again from its checkpoint. */
  restartFromCheckpoint(): void {
    this.abandonStep();
    for (const b of this.batches) {
      if (!b || b.step < this.stepsDone) continue;
      for (const x of b.samples) {
        x.epoch++;
        if (x.owner) this.leave(x.owner, x);
        if (!x.done && x.turnsDone > 0) {
          this.k.emit(
            'TrajectoryStatusChanged',
            { trajectoryId: x.id, batchId: `b${x.step}.${x.attempt}`, step: x.step, promptId: x.promptId, sampleIndex: x.sampleIndex, status: 'aborted' },
            'sim/job',
          );
        }
        x.owner = null;
      }
    }
    this.batches.forEach((b, st) => {
      if (!b || st < this.stepsDone) return;
      delete this.batches[st];
      this.attempts.set(st, (this.attempts.get(st) ?? 0) + 1);
    });
    this.waiting.clear();
    this.minVersion = this.latestVersion + 1;
    // The current step's batch goes out again with the first weights published after the restart.
  }

  // ── rollouts ─────────────────────────────────────────────────────────────────────────────────
  /** The weights a batch is generated with: its step's (sync/semi-sync) or one step older (async). */
  private requiredStep(step: number): number {
    return this.s.mode === 'async' ? Math.max(0, step - 1) : step;
  }

  /** Queues the samples of a step's batch, once per attempt (a task restart makes a new attempt). */
  releaseBatch(step: number): void {
    if (step >= this.s.steps || this.batches[step]) return;
    const attempt = this.attempts.get(step) ?? 0;
    const samples: Sample[] = [];
    const r = this.s.rollout;
    for (let p = 0; p < this.s.batch.prompts; p++) {
      for (let i = 0; i < this.s.batch.responsesPerPrompt; i++) {
        const turns = this.rng.int(r.turns.min, r.turns.max);
        const total = Math.min(r.responseSeconds.max, this.rng.logNormal(r.responseSeconds.median, r.responseSeconds.sigma));
        const toolSeconds = Array.from({ length: turns - 1 }, () =>
          r.toolSeconds.median > 0 ? this.rng.logNormal(r.toolSeconds.median, r.toolSeconds.sigma) : 0,
        );
        samples.push({
          id: `s${step}.${attempt}/p${p}/${i}`,
          step,
          attempt,
          promptId: `s${step}-p${p}`,
          sampleIndex: i,
          turns,
          turnSeconds: total / turns,
          toolSeconds,
          turnsDone: 0,
          owner: null,
          epoch: 0,
          awaitingTool: false,
          done: false,
        });
      }
    }
    const batch: Batch = { step, attempt, samples, done: 0, released: true };
    this.batches[step] = batch;
    for (const x of samples) this.wait(x);
    this.dispatch();
  }

  /**
   * The newest weights (in steps trained) a machine holds whole, of the versions still usable. Asked
   * for every free rollout on every completed sample, and a machine keeps every version it ever held:
   * remembered until its holdings or the usable versions change (otherwise each call walked
   * every version of the job so far). A version's step never changes once published.
   */
  private weightsStepOf(m: Machine): number {
    const known = this.weightsSteps.get(m);
    if (known && known.heldChanges === m.heldChanges && known.minVersion === this.minVersion) return known.step;
    let best = -1;
    for (const v of m.held) if (v >= this.minVersion) best = Math.max(best, this.versionStep.get(v) ?? -1);
    this.weightsSteps.set(m, { heldChanges: m.heldChanges, minVersion: this.minVersion, step: best });
    return best;
  }
  private readonly weightsSteps = new WeakMap<Machine, { heldChanges: number; minVersion: number; step: number }>();

  /** A rollout came up (`ready`) or holds new weights: waiting samples may go to it. */
  rolloutCanTakeMore(m: Machine, ready: boolean): void {
    if (ready) this.mayTakeMore.add(m);
    this.dispatch();
  }

  /** `sample` leaves `m` (done, moved or lost): `m` may take another. */
  private leave(m: Machine, sample: Sample): void {
    m.running.delete(sample);
    this.mayTakeMore.add(m);
  }

  /**
   * The rollouts with a free slot, with the weights each holds and its place in the roster (ties in
   * load go to the first). Not sorted: dispatch compares places, and sorting the free rollouts on every
   * completed sample (hundreds of them at thousands of GPUs) showed in profiles.
   */
  private freeRollouts(): Array<{ m: Machine; weights: number; place: number }> {
    const order = this.agents.rolloutOrder();
    const free: Array<{ m: Machine; weights: number; place: number }> = [];
    for (const m of this.mayTakeMore) {
      const place = order.get(m);
      if (place !== undefined && m.alive && m.process === 'ready' && m.running.size < m.slots) free.push({ m, weights: this.weightsStepOf(m), place });
      else this.mayTakeMore.delete(m);
    }
    return free;
  }

  private wait(sample: Sample): void {
    this.waiting.push(sample, this.requiredStep(sample.step));
  }

  /**
   * Hands waiting samples, oldest first, to the least loaded rollouts that hold the weights for them;
   * a sample no free rollout can take waits on (in its place), one of a batch given up is dropped.
   */
  dispatch(): void {
    if (this.waiting.length === 0) return;
    const free = this.freeRollouts();
    let most = newestWeights(free);
    while (free.length > 0) {
      const sample = this.waiting.takeOldestUpTo(most);
      if (!sample) break;
      if (sample.done || this.batches[sample.step]?.attempt !== sample.attempt) continue;
      const need = this.requiredStep(sample.step);
      // The least loaded rollout holding the weights, the first in the roster of those.
      let best = -1;
      for (let j = 0; j < free.length; j++) {
        if (free[j].weights < need) continue;
        if (best < 0) best = j;
        else {
          const load = free[j].m.running.size - free[best].m.running.size;
          if (load < 0 || (load === 0 && free[j].place < free[best].place)) best = j;
        }
      }
      const m = free[best].m;
      this.startOn(sample, m);
      if (m.running.size >= m.slots) {
        free.splice(best, 1);
        most = newestWeights(free);
      }
    }
  }

  private startOn(sample: Sample, m: Machine): void {
    sample.owner = m;
    sample.epoch++;
    m.running.add(sample);
    this.agents.reportPhase(m, 'rollout');
    this.scheduleTurn(sample);
  }

  private scheduleTurn(sample: Sample): void {
    const epoch = sample.epoch;
    sample.awaitingTool = false;
    this.k.after(sample.turnSeconds * 1000, () => {
      if (sample.epoch !== epoch || !sample.owner) return;
      const m = sample.owner;
      this.k.emit(
        'TrajectoryTurnAppended',
        {
          trajectoryId: sample.id,
          batchId: `b${sample.step}.${sample.attempt}`,
          step: sample.step,
          promptId: sample.promptId,
          sampleIndex: sample.sampleIndex,
          turnId: `${sample.id}/t${sample.turnsDone}`,
          turnIndex: sample.turnsDone,
          kind: 'model-output',
          rolloutId: m.id,
          weightVersion: this.latestVersion,
          tokens: Math.round(sample.turnSeconds * this.s.rollout.tokensPerSecond),
        },
        `agent/${m.id}`,
      );
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
    this.leave(m, sample);
    m.completedInWindow++;
    sample.done = true;
    sample.owner = null;
    this.k.emit(
      'TrajectoryStatusChanged',
      {
        trajectoryId: sample.id,
        batchId: `b${sample.step}.${sample.attempt}`,
        step: sample.step,
        promptId: sample.promptId,
        sampleIndex: sample.sampleIndex,
        status: 'completed',
      },
      `agent/${m.id}`,
    );
    const batch = this.batches[sample.step];
    if (batch && batch.attempt === sample.attempt) {
      batch.done++;
      if (batch.done === this.B) {
        if (this.s.mode === 'async') this.releaseBatch(sample.step + 1);
        if (this.trainer.waitingForBatch && this.trainer.step === sample.step) {
          // Semi-sync: the last samples arrived; train on them (an eighth of a step) and finish.
          const epoch = this.trainer.epoch;
          this.trainer.waitingForBatch = false;
          for (const t of this.agents.trainers()) this.agents.reportPhase(t, 'training');
          this.k.after((this.s.training.stepSeconds / 8) * 1000, () => {
            if (this.trainer.epoch === epoch) this.finishStep(epoch);
          });
        }
      }
    }
    if (m.running.size === 0) this.agents.reportPhase(m, 'idle');
    this.maybeTrain();
    this.dispatch();
  }

  // ── samples moved by the control plane ───────────────────────────────────────────────────────
  private onConfirmed(m: MessageOf<'FaultConfirmed'>): void {
    const machine = this.agents.machines.get(m.data.machineId);
    // The machine is gone, or only its engine process: either way what ran on it stopped.
    if (!machine || machine.role !== 'rollout' || (machine.alive && machine.process !== 'dead')) return;
    this.evacuate(machine);
  }

  /**
   * A rollout stopped serving (failed, or lent to the trainer): after the rollout manager has moved what
   * it knows of (its reassignment follows on the bus), the router re-sends requests that had stored no
   * turn yet: they start over elsewhere.
   */
  evacuate(machine: Machine): void {
    this.k.after(0, () => {
      for (const x of [...machine.running]) {
        this.leave(machine, x);
        x.owner = null;
        x.epoch++;
        // Not moved by the rollout manager (no stored turn, or nowhere to go then): retried from what it has.
        this.wait(x);
      }
      this.dispatch();
    });
  }

  private onReassigned(m: MessageOf<'TrajectoriesReassigned'>): void {
    for (const a of m.data.assignments) {
      const target = this.agents.machines.get(a.toRolloutId);
      let sample: Sample | undefined;
      const from = this.agents.machines.get(m.data.fromRolloutId);
      for (const x of from?.running ?? []) if (x.id === a.trajectoryId) sample = x;
      sample ??= this.findSample(a.trajectoryId);
      if (!sample || sample.done) continue;
      if (from) this.leave(from, sample);
      sample.owner = null;
      sample.epoch++;
      sample.turnsDone = Math.min(sample.turnsDone, a.resumeFromTurn); // the preserved prefix
      if (target && target.alive && target.process === 'ready') this.startOn(sample, target);
      else this.wait(sample);
    }
    this.dispatch();
  }

  private findSample(id: string): Sample | undefined {
    for (const b of this.batches) for (const x of b?.samples ?? []) if (x.id === id) return x;
    return undefined;
  }
}

/** The newest weights (in steps) any of these rollouts holds; -1 for none. */
function newestWeights(free: ReadonlyArray<{ weights: number }>): number {
  let most = -1;
  for (const f of free) most = Math.max(most, f.weights);
  return most;
}
