import { Logger } from '@nestjs/common';
import { nextEngineWeightAction } from './engine-weight-action';
import { EnginePart, VllmEngineClient } from './vllm-engine-client';
import { RobustrlError } from '@robustrl/bus';

/** The newest version this machine holds whole, as the weight plane's `latest()` describes it. */
export interface HeldVersion {
  version: number;
  parts: Array<{ path: string | null; target: string | null; bucketStarts: number[]; tensors: unknown[] | null }>;
}

/**
 * Keeps a rollout machine's vLLM engine on the newest version its agent holds (paper §5.2.1 ➃: the
 * rollout loads a version once it is whole): every tick it asks the engine which version it serves and
 * loads the held one when it is newer, or when the engine restarted and serves its starting model again.
 * One load at a time; a failed one is tried again on a later tick (a failure inside vLLM's reload ends
 * the engine, whose exit the agent reports as a fault like any other).
 *
 * An engine that is not robustrl's client reports no phase of its own, so the agent reports it for the
 * engine (`phase`): `weight-update` while a version loads, `rollout` once the engine answers with a
 * version, `idle` once it has run no request for `idleAfterMs` (its metrics say so; an engine without
 * them stays `rollout`) — what phase-aware detection and the ETTR projection count its time by (paper
 * §4, §7: an engine with nothing to do while the trainer is down waits on a dead role).
 */
export type EnginePhase = 'weight-update' | 'rollout' | 'idle';

export interface EngineIdleSettings {
  /** How long an engine runs no request before it counts as idle (a loop's gap between two requests is not idleness). */
  idleAfterMs: number;
  now: () => number;
}
const DEFAULT_IDLE: EngineIdleSettings = { idleAfterMs: 3_000, now: () => Date.now() };

/**
 * An engine wedged in a weight load (alive, answering its health check, never finishing the update) stalls
 * its machine's rollouts for good: a load not finished within `deadlineMs` is reported once (`onStalled`,
 * which the agent turns into a fault signal, so the controller restarts the engine) until the engine restarts.
 * So is an engine that answered its agent since it started and then answers none of its looks (its
 * version) for as long: stopped or wedged outside a load — its port still accepts connections, and
 * requests that do not stream show nothing of it until they end (`unresponsive`).
 */
export interface LoadDeadline {
  deadlineMs: number;
  /** `forMs`: how long the evidence lasted (since the load began, or the first unanswered look). */
  onStalled: (detail: string, how: 'load' | 'unresponsive', forMs: number) => void;
}
const NO_DEADLINE: LoadDeadline = { deadlineMs: Number.POSITIVE_INFINITY, onStalled: () => undefined };

class LoadStalledError extends RobustrlError {
  constructor(
    message: string,
    readonly startedAt: number,
  ) {
    super(message);
  }
}
export class EngineWeightSync {
  private readonly logger: Logger;
  private timer?: NodeJS.Timeout;
  private busy = false;
  private failures = 0;
  private skipTicks = 0;
  /** The version the engine was last loaded with by this agent, and how long it took. */
  lastLoad: { version: number; seconds: number } | null = null;
  /** When the engine last had a request (null: not seen serving yet). */
  private busyAt: number | null = null;
  /** The engine's finished-request counter at the last look (null: unknown). */
  private finished: number | null = null;
  /** A stalled load was reported for this engine (cleared when it restarts). */
  private stallReported = false;
  /** The engine answered a look since it (re)started; since when it has not answered one, if so. */
  private answered = false;
  private silentSince: number | null = null;

  constructor(
    private readonly engine: VllmEngineClient,
    private readonly held: () => HeldVersion | null,
    machineId: string,
    private readonly tickMs = 500,
    private readonly phase: (phase: EnginePhase, version: number) => void = () => undefined,
    private readonly idle: EngineIdleSettings = DEFAULT_IDLE,
    private readonly load: LoadDeadline = NO_DEADLINE,
  ) {
    this.logger = new Logger(`engine-weights/${machineId}`);
  }

  start(): void {
    this.timer ??= setInterval(() => void this.tick(), this.tickMs);
  }

  /** The engine was restarted: a back-off earned by the old one does not delay stamping the new one. */
  engineRestarted(): void {
    this.failures = 0;
    this.skipTicks = 0;
    this.busyAt = null;
    this.finished = null;
    this.stallReported = false;
    this.answered = false;
    this.silentSince = null;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One look at the engine; exposed for tests. */
  async tick(): Promise<void> {
    if (this.busy) return;
    if (this.skipTicks > 0) {
      this.skipTicks -= 1;
      return;
    }
    this.busy = true;
    try {
      const latest = this.held();
      let serving = await this.engine.weightVersion();
      if (this.unanswered(serving)) return;
      let action = nextEngineWeightAction(serving, latest?.version ?? null);
      if (action.kind === 'stamp-base') {
        await this.engine.stamp(0);
        this.logger.log('engine serves the model it started from: stamped as version 0');
        this.busyAt = this.idle.now();
        this.phase('rollout', 0);
        // A newer version held is loaded in the same look.
        serving = '0';
        action = nextEngineWeightAction(serving, latest?.version ?? null);
        if (action.kind !== 'load') return;
      }
      if (action.kind === 'wait' && serving !== null && /^\d+$/.test(serving)) {
        this.phase(await this.servingPhase(), Number(serving));
      } else if (action.kind === 'load' && latest) {
        const parts = hostParts(latest);
        if (parts === null) {
          this.logger.warn(`version ${latest.version} lies in device buffers: the engine loads it from its registered targets, not through this agent`);
          return;
        }
        this.logger.log(`engine loads version ${latest.version}`);
        this.phase('weight-update', latest.version);
        const loaded = await this.withinDeadline(this.engine.load(latest.version, parts), latest.version);
        this.lastLoad = { version: latest.version, seconds: loaded.seconds };
        this.failures = 0;
        this.logger.log(`engine loaded version ${latest.version} in place (${loaded.seconds.toFixed(3)} s)`);
        this.busyAt = this.idle.now();
        this.phase('rollout', latest.version);
      }
    } catch (err) {
      if (err instanceof LoadStalledError && !this.stallReported) {
        this.stallReported = true;
        this.logger.error(err.message);
        this.load.onStalled(err.message, 'load', Math.max(0, this.idle.now() - err.startedAt));
      }
      this.failures += 1;
      // Back off: 1, 2, 4 … up to 32 ticks between tries while the engine keeps refusing.
      this.skipTicks = Math.min(2 ** (this.failures - 1), 32);
      this.logger.warn(`loading weights into the engine failed (try ${this.failures}): ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      this.busy = false;
    }
  }

  /**
   * Whether the engine did not answer this look (null: refused, timed out). A starting engine answers
   * nothing for minutes; one that answered since it started and then answers nothing for the deadline —
   * its process running, its port accepting connections — is stopped or wedged: reported once.
   */
  private unanswered(serving: string | null): boolean {
    const now = this.idle.now();
    if (serving !== null) {
      this.answered = true;
      this.silentSince = null;
      return false;
    }
    if (!this.answered) return true;
    this.silentSince ??= now;
    const silentMs = now - this.silentSince;
    if (silentMs >= this.load.deadlineMs && !this.stallReported) {
      this.stallReported = true;
      const detail = `the engine has not answered its agent for ${Math.round(silentMs / 1000)} s: stopped or wedged`;
      this.logger.error(detail);
      this.load.onStalled(detail, 'unresponsive', silentMs);
    }
    return true;
  }

  /** The load, or a LoadStalledError once its deadline passed (the engine's call itself is left to its own timeout). */
  private withinDeadline<T>(load: Promise<T>, version: number): Promise<T> {
    if (!Number.isFinite(this.load.deadlineMs)) return load;
    const startedAt = this.idle.now();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, fail) => {
      timer = setTimeout(
        () =>
          fail(
            new LoadStalledError(
              `the engine did not finish loading version ${version} within ${this.load.deadlineMs / 1000} s: wedged in its weight load`,
              startedAt,
            ),
          ),
        this.load.deadlineMs,
      );
    });
    load.catch(() => undefined); // settled after the deadline: nobody waits on it any more
    return Promise.race([load, deadline]).finally(() => clearTimeout(timer));
  }

  /** `rollout` while it has requests or finished one since the last look (or did within `idleAfterMs`, or cannot say), `idle` after. */
  private async servingPhase(): Promise<EnginePhase> {
    const activity = await this.engine.activity();
    const now = this.idle.now();
    const finishedMore = activity?.finished != null && this.finished !== null && activity.finished > this.finished;
    this.finished = activity?.finished ?? null;
    if (activity === null || activity.inFlight > 0 || finishedMore || this.busyAt === null) this.busyAt = now;
    return activity !== null && now - this.busyAt >= this.idle.idleAfterMs ? 'idle' : 'rollout';
  }
}

/** The parts as files the engine reads, or null when any lies in device memory. */
function hostParts(held: HeldVersion): EnginePart[] | null {
  const parts: EnginePart[] = [];
  for (const p of held.parts) {
    if (p.path === null) return null;
    parts.push({ path: p.path, tensors: p.tensors ?? [], bucketStarts: p.bucketStarts });
  }
  return parts;
}
