import type { DataOf } from '@robustrl/contracts';
import type { EngineView } from './engine-pool';

export interface EngineThroughput {
  engineId: string;
  machineId: string;
  windowSeconds: number;
  tokensPerSecond: number;
  completedRequests: number;
  inFlightRequests: number;
  /** Trajectories whose last answer on this engine was a tool call and whose next turn has not come. */
  awaitingTools: number;
}

/**
 * Rollout throughput as the router sees it (paper §4 ➀: the rollout manager collects throughput per
 * rollout for the detector). Counting at the router needs nothing from the engines, and it knows
 * what the engine cannot: a trajectory parked on a tool call is work waiting on the environment, not
 * a stalled engine — the detector's rollout rule must see that as healthy zero throughput.
 */
export class ThroughputMeter {
  private tokens = new Map<string, number>();
  private completed = new Map<string, number>();
  private readonly awaiting = new Map<string, string>();
  private windowStart: number;

  constructor(now: number) {
    this.windowStart = now;
  }

  /** A request finished on `engineId` having generated `tokens`. */
  answered(engineId: string, tokens: number): void {
    this.tokens.set(engineId, (this.tokens.get(engineId) ?? 0) + tokens);
    this.completed.set(engineId, (this.completed.get(engineId) ?? 0) + 1);
  }

  /** The trajectory's last answer was a tool call on `engineId` (null: it came back with the tool's result). */
  awaitingTools(trajectoryId: string, engineId: string | null): void {
    if (engineId === null) this.awaiting.delete(trajectoryId);
    else this.awaiting.set(trajectoryId, engineId);
  }

  /** The samples of the window that ends at `now`, one per engine; the next window starts. */
  take(now: number, engines: readonly EngineView[]): EngineThroughput[] {
    const seconds = Math.max(0.001, (now - this.windowStart) / 1000);
    const parked = new Map<string, number>();
    for (const engineId of this.awaiting.values()) parked.set(engineId, (parked.get(engineId) ?? 0) + 1);
    const samples = engines.map((e) => ({
      engineId: e.id,
      machineId: e.machineId,
      windowSeconds: seconds,
      tokensPerSecond: (this.tokens.get(e.id) ?? 0) / seconds,
      completedRequests: this.completed.get(e.id) ?? 0,
      inFlightRequests: e.inFlight + (parked.get(e.id) ?? 0),
      awaitingTools: parked.get(e.id) ?? 0,
    }));
    this.tokens = new Map();
    this.completed = new Map();
    this.windowStart = now;
    return samples;
  }
}

/** A window's throughput of one engine as the detector's `RolloutThroughputSampled` carries it. */
export function throughputSampled(s: EngineThroughput, sampledAt: string): DataOf<'RolloutThroughputSampled'> {
  return {
    machineId: s.machineId,
    rolloutId: s.engineId,
    sampledAt,
    windowSeconds: s.windowSeconds,
    tokensPerSecond: s.tokensPerSecond,
    completedRequests: s.completedRequests,
    inFlightRequests: s.inFlightRequests,
    awaitingTools: s.awaitingTools,
  };
}
