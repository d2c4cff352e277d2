import { SeededRandom } from '../random';
import type { Scenario } from '../scenario';
import type { ClusterEnvironment } from './cluster-environment';
import { jobShape } from './cluster-model';
import { FaultInjector } from './fault-injector';
import { MachineAgents } from './machine-agents';
import { Orchestrator, RestartRecord } from './orchestrator';
import { RlPipeline } from './rl-pipeline';

export type { RestartKind, RestartRecord } from './orchestrator';

/**
 * The emulated GPU cluster of one RL job: trainer and rollout machines with their agents, generating,
 * training and syncing weights on the virtual clock, and carrying out the control plane's commands.
 *
 * It only *acts* through messages, exactly like real agents: registrations, phases, telemetry, trajectory
 * turns, weight pulls, fault signals, heartbeat acks and command outcomes go out on the bus; verdicts,
 * recovery commands, pull assignments and trajectory reassignments come in from the real deciders.
 * Faults are injected here; detection and the choice of recovery are entirely the deciders'.
 *
 * The actors share the machines and call one another synchronously, in the order one object did: every
 * random draw and every agenda item falls where it did, so a seed still gives the same run.
 */
export class EmulatedCluster {
  private readonly agents: MachineAgents;
  private readonly pipeline: RlPipeline;
  private readonly faults: FaultInjector;
  private readonly orchestrator: Orchestrator;

  constructor(k: ClusterEnvironment, s: Scenario, seed: number, injectFaults: boolean) {
    const root = new SeededRandom(seed);
    const workloadRng = root.fork('workload');
    const faultRng = root.fork('faults');
    const shape = jobShape(s);
    this.agents = new MachineAgents(k, s, shape, {
      trainerStep: () => this.pipeline.trainerStep,
      finished: () => this.pipeline.finishedAt !== null,
      trainerReady: (m) => this.pipeline.trainerReady(m),
      rolloutCanTakeMore: (m, ready) => this.pipeline.rolloutCanTakeMore(m, ready),
    });
    this.pipeline = new RlPipeline(k, s, shape, workloadRng, this.agents, (stepsDone) => this.faults.stepFinished(stepsDone));
    this.faults = new FaultInjector(k, s, faultRng, injectFaults, this.agents, this.pipeline);
    this.orchestrator = new Orchestrator(k, s, shape, this.agents, this.pipeline, this.faults);
  }

  start(): void {
    this.pipeline.announce();
    this.agents.bringUp();
    this.pipeline.releaseBatch(0);
    this.agents.startTelemetry();
    this.faults.start();
  }

  get stepsDone(): number {
    return this.pipeline.stepsDone;
  }

  get finishedAt(): number | null {
    return this.pipeline.finishedAt;
  }

  get faultsInjected(): number {
    return this.faults.faultsInjected;
  }

  get restarts(): RestartRecord[] {
    return this.orchestrator.restarts;
  }
}
