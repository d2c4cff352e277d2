import { EnginePool } from './engine-pool';
import { evictOldest } from './evict-oldest';
import { RouterLogger } from './router-reporting';

/**
 * Liveness after each tool iteration (paper §3: the rollout manager checks liveness after each tool
 * iteration). A trajectory answered with a tool call comes back minutes later with the tool's result;
 * its engine may have died silently meanwhile, and a request to a hung machine would wait out the idle
 * timeout instead of moving on. So its engine is probed before the next turn: a failed probe takes the
 * engine out of selection and the turn goes to a living one at once.
 */
export class ToolIterationLiveness {
  /** Trajectory → the engine that answered it with a tool call. Insertion order is age order. */
  private readonly awaiting = new Map<string, string>();

  constructor(
    private readonly pool: EnginePool,
    /** Off: nothing is probed (the map is still kept, so switching costs nothing). */
    private readonly enabled: boolean,
    private readonly log: RouterLogger,
  ) {}

  /** `engineId` answered the trajectory with a tool call: the trajectory now waits on its tool. */
  awaitingTool(trajectoryId: string, engineId: string): void {
    this.awaiting.delete(trajectoryId); // re-inserted last: the map's order is the age order
    this.awaiting.set(trajectoryId, engineId);
    // A trajectory that never comes back must not be remembered forever.
    evictOldest(this.awaiting, 100_000);
  }

  /** The trajectory is back (with its tool's result, if it was waiting on one): check its engine first. */
  async returned(trajectoryId: string): Promise<void> {
    const engineId = this.awaiting.get(trajectoryId);
    this.awaiting.delete(trajectoryId);
    if (engineId !== undefined && this.enabled && this.pool.get(engineId)?.alive) {
      const alive = await this.pool.probe(engineId);
      if (!alive) this.log.warn('engine failed its liveness check after a tool iteration', { engine: engineId, trajectoryId });
    }
  }
}
