import { Logger } from '@nestjs/common';
import { EngineEndpoint, listsEngines } from '../engine-endpoints';
import { EngineSet, managedVllmEngines } from './engine-set';
import { EnginePhase, HeldVersion, LoadDeadline } from './engine-weight-sync';

/**
 * The inference engines of this machine as its agent knows them (docs/integrators/engines.md):
 * the list from its settings or from its framework (PUT /v1/engines), what the registration says of them,
 * and — with ROBUSTRL_ENGINE_WEIGHTS=vllm — the syncs that load each held version into them, made again
 * whenever the list changes.
 */
export class MachineEngines {
  private list: EngineEndpoint[];
  /** The list is the framework's (PUT /v1/engines), not the agent's settings. */
  private told = false;
  private managed?: EngineSet;

  constructor(
    private readonly machineId: string,
    initial: EngineEndpoint[],
    private readonly loads: {
      mode: 'off' | 'vllm';
      deadlineMs: number;
      /** A framework will tell its engines later (cooperate mode): none yet is no error. */
      toldLater: boolean;
      held: () => HeldVersion | null;
      phase: (phase: EnginePhase, version: number) => void;
      onStalled: LoadDeadline['onStalled'];
    },
    private readonly logger: Logger,
  ) {
    this.list = initial;
  }

  /** Whether the agent loads versions into them (and so reports their phase). */
  get loading(): boolean {
    return this.managed !== undefined;
  }

  start(): void {
    if (this.loads.mode !== 'vllm') return;
    this.managed?.stop();
    this.managed = undefined;
    if (this.list.length === 0 && this.loads.toldLater) {
      this.logger.log('no engines yet: versions are loaded once the framework tells its engines (PUT /v1/engines)');
      return;
    }
    this.managed = managedVllmEngines(
      { engines: this.list, engineLoadDeadlineMs: this.loads.deadlineMs },
      this.loads.held,
      this.loads.phase,
      this.loads.onStalled,
    );
    this.managed.start();
  }

  /** The framework's engines replace the list (and the syncs follow). */
  set(engines: EngineEndpoint[]): void {
    this.list = engines;
    this.told = true;
    this.logger.log(`engines on this machine: ${engines.map((e) => `${e.engineId} at ${e.url}`).join(', ')}`);
    this.start();
  }

  stop(): void {
    this.managed?.stop();
  }

  /**
   * The role's engines restarted. In cooperate mode the engines the framework told are unknown again
   * until it tells them: it started new ones, perhaps at other addresses, and the old address may hold a
   * process shutting down (the registration that follows lists none, so the router stops sending there).
   */
  restarted(): void {
    if (!this.told || !this.loads.toldLater) return this.managed?.engineRestarted();
    this.list = [];
    this.told = false;
    this.logger.log('the framework restarts its engines: none known until it tells them again (PUT /v1/engines)');
    this.start();
  }

  /** What the registration says: one engine under the machine's own id is its `inferenceUrl`, as agents always registered it. */
  registration(): { engines?: EngineEndpoint[]; inferenceUrl?: string } {
    if (listsEngines(this.machineId, this.list)) return { engines: this.list };
    return this.list.length ? { inferenceUrl: this.list[0].url } : {};
  }

  status(): { engines: EngineEndpoint[]; engineWeights?: { engines: ReturnType<EngineSet['loads']> } } {
    return { engines: this.list, ...(this.managed ? { engineWeights: { engines: this.managed.loads() } } : {}) };
  }
}
