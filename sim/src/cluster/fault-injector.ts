import type { MessageOf } from '@robustrl/contracts';
import type { SeededRandom } from '../random';
import type { Scenario } from '../scenario';
import type { ClusterEnvironment } from './cluster-environment';
import type { Machine } from './cluster-model';
import type { MachineAgents } from './machine-agents';
import type { RlPipeline } from './rl-pipeline';

/**
 * Breaks the cluster on the scenario's schedule: trainer processes are killed (and say so) — or one
 * trainer machine's GPU fails (XID) and takes the group down with it; rollout machines fail silently, or
 * their engine process crashes on a healthy machine; a trainer fault may strike its step again. It draws
 * only from its own random stream, so injecting faults or not leaves the workload's draws alone, and a
 * kind of fault the scenario leaves at 0 draws nothing (the scenarios without it run as before).
 */
export class FaultInjector {
  faultsInjected = 0;
  /**
   * Paper §7.1: a trainer fault at a random time within every 10% of the steps, by killing all trainers.
   * Drawn up front from the fault stream: per window of steps, one step of the window and a point within
   * that step's cycle (the previous cycle's length scales it). Step 0 is left alone: a fault in the first
   * iteration restarts the task by rule (paper §5.1.2) whatever the strategy.
   */
  private readonly trainerFaultPlan = new Map<number, number>();
  /** The step of the last trainer fault: a second one in the same step would be a different experiment (rule 2 escalates it). */
  private lastTrainerFaultStep = -1;
  private lastCycleStart: number;
  private lastCycleMs = 0;
  /** Set once rollout faults are on: machines that come back later are armed the same way. */
  private rolloutFaultsPerHour: number | null = null;
  /** A trainer fault that will strike this step again once the restarted group trains it (rule 2). */
  private repeatStep: number | null = null;

  constructor(
    private readonly k: ClusterEnvironment,
    private readonly s: Scenario,
    private readonly rng: SeededRandom,
    private readonly enabled: boolean,
    private readonly agents: MachineAgents,
    private readonly pipeline: RlPipeline,
  ) {
    this.lastCycleStart = k.now;
    k.subscribe(['TrainingStepStarted'], (m) => this.stepStarted((m as MessageOf<'TrainingStepStarted'>).data.step));
  }

  start(): void {
    if (!this.enabled) return;
    this.planTrainerFaults();
    this.scheduleRolloutFaults();
  }

  /** Trainer faults land within a step's cycle, so each finished step may set off the one planned for it. */
  stepFinished(stepsDone: number): void {
    this.lastCycleMs = this.k.now - this.lastCycleStart;
    this.lastCycleStart = this.k.now;
    const plan = this.trainerFaultPlan.get(stepsDone);
    if (plan !== undefined) this.k.after(plan * Math.max(1, this.lastCycleMs), () => this.killTrainers(plan));
  }

  private planTrainerFaults(): void {
    const every = this.s.faults.trainerEveryStepsFraction;
    if (every === null) return;
    const window = Math.max(1, Math.round(this.s.steps * every));
    for (let first = 0; first < this.s.steps; first += window) {
      const lo = Math.max(1, first);
      const hi = Math.min(this.s.steps - 1, first + window - 1);
      if (lo > hi) continue;
      this.trainerFaultPlan.set(this.rng.int(lo, hi), this.rng.next());
    }
  }

  private killTrainers(phase: number, repeat = false): void {
    if (this.pipeline.finishedAt !== null) return;
    if (!repeat && this.lastTrainerFaultStep === this.pipeline.trainerStep) {
      // Its window's step ran long and this draw landed in a step that already had its fault: move it on.
      this.trainerFaultPlan.set(this.pipeline.stepsDone + 1, phase);
      return;
    }
    this.lastTrainerFaultStep = this.pipeline.trainerStep;
    this.faultsInjected++;
    const f = this.s.faults;
    if (!repeat && f.repeatInStepProbability > 0 && this.rng.next() < f.repeatInStepProbability) this.repeatStep = this.pipeline.trainerStep;
    const living = this.agents.trainers().filter((m) => m.alive && m.process !== 'dead');
    // A GPU failure first: its XID is the first signal, so the verdict the controller decides on is the
    // hardware one; the other ranks' exits that follow are covered by that recovery.
    if (f.trainerHardwareFraction > 0 && living.length > 0 && this.rng.next() < f.trainerHardwareFraction) {
      const broken = living[this.rng.int(0, living.length - 1)];
      // The machine's state first: the control plane may act on the signal before emit returns.
      broken.alive = false;
      broken.process = 'dead';
      broken.epoch++;
      this.k.emit(
        'AgentFaultSignalled',
        {
          machineId: broken.id,
          role: 'trainer',
          signal: 'xid-error',
          detail: 'XID 79: GPU has fallen off the bus (fault injection)',
          exitCode: null,
          observedAt: new Date(this.k.now).toISOString(),
        },
        `agent/${broken.id}`,
      );
    }
    for (const m of this.agents.trainers()) {
      if (!m.alive || m.process === 'dead') continue;
      m.process = 'dead';
      m.epoch++;
      this.k.emit(
        'AgentFaultSignalled',
        {
          machineId: m.id,
          role: 'trainer',
          signal: 'process-exited',
          detail: 'trainer process killed (fault injection)',
          exitCode: 137,
          observedAt: new Date(this.k.now).toISOString(),
        },
        `agent/${m.id}`,
      );
    }
    this.pipeline.abandonStep();
  }

  /** The restarted group trains the faulted step again: the repeat strikes at a random point of its compute. */
  private stepStarted(step: number): void {
    if (this.repeatStep !== step) return;
    this.repeatStep = null;
    const at = this.rng.next() * this.s.training.stepSeconds * 1000;
    this.k.after(at, () => {
      if (this.pipeline.trainerStep === step) this.killTrainers(0, true);
    });
  }

  private scheduleRolloutFaults(): void {
    const rate = this.s.faults.rolloutFaultsPerMachineHour;
    if (rate <= 0) return;
    this.rolloutFaultsPerHour = rate;
    for (const m of this.agents.rollouts()) this.armRollout(m);
  }

  /** Draws when this rollout machine's hardware fails next (memoryless): on start, replacement or return. */
  armRollout(m: Machine): void {
    const rate = this.rolloutFaultsPerHour;
    if (rate === null) return;
    const ms = this.rng.exponential(3_600_000 / rate);
    this.k.after(ms, () => {
      if (this.pipeline.finishedAt !== null || !m.alive || m.role !== 'rollout' || m.process !== 'ready' || !this.agents.machines.has(m.id)) return;
      this.faultsInjected++;
      const share = this.s.faults.rolloutProcessFraction;
      if (share > 0 && this.rng.next() < share) {
        // The engine process crashes on a healthy machine: its agent says so, and answers probes still.
        m.process = 'dead';
        m.epoch++;
        for (const x of m.running) x.epoch++;
        this.k.emit(
          'AgentFaultSignalled',
          {
            machineId: m.id,
            role: 'rollout',
            signal: 'process-exited',
            detail: 'rollout engine exited (fault injection)',
            exitCode: 1,
            observedAt: new Date(this.k.now).toISOString(),
          },
          `agent/${m.id}`,
        );
        return;
      }
      // A silent machine failure: no signal, no telemetry, no probe answers — the detector must find it.
      m.alive = false;
      m.process = 'dead';
      m.epoch++;
      for (const x of m.running) x.epoch++;
    });
  }
}
