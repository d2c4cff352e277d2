import type { DataOf } from '@robustrl/contracts';
import { EngineView } from './engine-pool';

/** One engine's requests over a window, as the detector's `RolloutRequestsObserved` carries them. */
export interface EngineRequestReport {
  engineId: string;
  machineId: string;
  windowSeconds: number;
  openRequests: number;
  idleForMs: number;
  failedRequests: number;
  succeededRequests: number;
  lastFailure: string | null;
}

interface EngineRequests {
  /**
   * It answered or produced a token since it joined the pool. Until then its failures and silence are
   * a start (an engine still loading refuses connections or answers 503), not a wedge: the machine's
   * agent and the role rules watch a start.
   */
  served: boolean;
  open: number;
  /** When the engine last had no request open (its current busy period began). */
  busySince: number | null;
  lastTokenAt: number | null;
  failed: number;
  succeeded: number;
  lastFailure: string | null;
  /** The last report said it was idle with requests open: the next one says it is not, so the detector's view clears. */
  reportedIdle: boolean;
}

/**
 * What the router sees of each engine's real requests ("detection from real requests"): which
 * are open at it, when it last produced a token, which failed and why. A wedged engine answers /health
 * and its machine's agent acks heartbeats, but its requests stall; this is the evidence that finds it
 * in seconds. An engine is judged only once it served since it joined the pool: before, it is starting.
 * Only streamed requests count as open — a non-streamed one shows no tokens until it ends,
 * and a long generation would look like a stall; all requests count when they fail or succeed. A
 * trajectory waiting on a tool has no request open, so tool waits are never idleness. Time is an input.
 */
export class RequestEvidence {
  private readonly engines = new Map<string, EngineRequests>();
  private windowStart: number;

  constructor(now: number) {
    this.windowStart = now;
  }

  /** A streamed request was sent to the engine. */
  opened(engineId: string, at: number): void {
    const e = this.entry(engineId);
    if (e.open === 0) e.busySince = at;
    e.open += 1;
  }

  /** The engine sent tokens (any request of it). */
  progressed(engineId: string, at: number): void {
    const e = this.entry(engineId);
    e.lastTokenAt = at;
    e.served = true;
  }

  /** When the engine last sent tokens for any request (undefined: never seen to). */
  lastTokenAt(engineId: string): number | undefined {
    return this.engines.get(engineId)?.lastTokenAt ?? undefined;
  }

  /** A streamed request's attempt on the engine ended. */
  closed(engineId: string): void {
    const e = this.entry(engineId);
    e.open = Math.max(0, e.open - 1);
    if (e.open === 0) e.busySince = null;
  }

  /** A request (streamed or not) ended on the engine: answered, or failed and why. */
  ended(engineId: string, outcome: { ok: true } | { ok: false; reason: string }): void {
    const e = this.entry(engineId);
    if (outcome.ok) {
      e.succeeded += 1;
      e.served = true;
    } else if (e.served) {
      e.failed += 1;
      e.lastFailure = outcome.reason.slice(0, 500);
    }
  }

  /**
   * The engine left the pool (its machine stopped serving, or holds no servable weights: a new agent
   * process, a task restart). When it joins again it is starting — an engine waiting for its weights
   * answers 503 — until it answers.
   */
  left(engineId: string): void {
    this.engines.delete(engineId);
  }

  /** The window's reports (engines with requests open, anything ended, or an idleness to clear), and a new window. */
  take(now: number, engines: readonly EngineView[]): EngineRequestReport[] {
    const windowSeconds = Math.max(0.001, (now - this.windowStart) / 1000);
    this.windowStart = now;
    const reports: EngineRequestReport[] = [];
    for (const engine of engines) {
      const e = this.engines.get(engine.id);
      if (!e) continue;
      const idleForMs = e.served && e.open > 0 && e.busySince !== null ? Math.max(0, now - Math.max(e.busySince, e.lastTokenAt ?? -Infinity)) : 0;
      const idle = idleForMs > 0 && e.open > 0;
      if ((e.open === 0 || !e.served) && e.failed === 0 && e.succeeded === 0 && !e.reportedIdle) continue;
      reports.push({
        engineId: engine.id,
        machineId: engine.machineId,
        windowSeconds,
        openRequests: e.open,
        idleForMs: Math.round(idleForMs),
        failedRequests: e.failed,
        succeededRequests: e.succeeded,
        lastFailure: e.failed > 0 ? e.lastFailure : null,
      });
      e.failed = 0;
      e.succeeded = 0;
      e.reportedIdle = idle;
    }
    const present = new Set(engines.map((e) => e.id));
    for (const id of this.engines.keys()) if (!present.has(id)) this.engines.delete(id);
    return reports;
  }

  private entry(engineId: string): EngineRequests {
    let e = this.engines.get(engineId);
    if (!e)
      this.engines.set(
        engineId,
        (e = { served: false, open: 0, busySince: null, lastTokenAt: null, failed: 0, succeeded: 0, lastFailure: null, reportedIdle: false }),
      );
    return e;
  }
}

/** A report as the detector's `RolloutRequestsObserved` carries it. */
export function requestsObserved(r: EngineRequestReport, observedAt: string): DataOf<'RolloutRequestsObserved'> {
  return {
    machineId: r.machineId,
    rolloutId: r.engineId,
    observedAt,
    windowSeconds: r.windowSeconds,
    openRequests: r.openRequests,
    idleForMs: r.idleForMs,
    failedRequests: r.failedRequests,
    succeededRequests: r.succeededRequests,
    lastFailure: r.lastFailure,
  };
}
