import type { SeededRandom } from '../random';
import type { Scenario } from '../scenario';
import type { ClusterEnvironment } from './cluster-environment';
import type { Machine } from './cluster-model';
import type { MachineAgents } from './machine-agents';
import type { RlPipeline } from './rl-pipeline';

/**
 * Breaks the cluster on the scenario's schedule: trainer processes are killed (and say so), rollout
 * machines fail silently. It draws only from its own random stream, so injecting faults or not leaves
 * the workload's draws alone.
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

  constructor(
    private readonly k: ClusterEnvironment,
    private readonly s: Scenario,
    private readonly rng: SeededRandom,
    private readonly enabled: boolean,
    private readonly agents: MachineAgents,
    private readonly pipeline: RlPipeline,
  ) {
    this.lastCycleStart = k.now;
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

  private killTrainers(phase: number): void {
    if (this.pipeline.finishedAt !== null) return;
    if (this.lastTrainerFaultStep === this.pipeline.trainerStep) {
      // Its window's step ran long and this draw landed in a step that already had its fault: move it on.
      this.trainerFaultPlan.set(this.pipeline.stepsDone + 1, phase);
      return;
    }
    this.lastTrainerFaultStep = this.pipeline.trainerStep;
    this.faultsInjected++;
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
      if (this.pipeline.finishedAt !== null || !m.alive || m.process !== 'ready' || !this.agents.machines.has(m.id)) return;
      this.faultsInjected++;
      // A silent machine failure: no signal, no telemetry, no probe answers — the detector must find it.
      m.alive = false;
      m.process = 'dead';
      m.epoch++;
      for (const x of m.running) x.epoch++;
    });
  }
}
