import { EngineKind } from './engines/engine-adapter';
import { evictOldest } from './evict-oldest';
import { httpProbe } from './engine-probe';

/** A rollout engine (one vLLM / SGLang server) as the router sees it. */
export interface EngineView {
  readonly id: string;
  /** The GPU machine the engine runs on (its id when not given): what the control plane's verdicts name. */
  readonly machineId: string;
  readonly baseUrl: string;
  /** Which engine serves there: how to read its token ids, continue on it, probe it (engines/). */
  readonly kind: EngineKind;
  readonly weightVersion: number;
  /** Requests the router has in flight on it. */
  readonly inFlight: number;
  readonly alive: boolean;
  /**
   * Its machine is leaving (a notice): when the engine leaves the pool (ms since the epoch), null when
   * it is not. Until then it takes no new request and keeps the ones it holds (`EnginePool.drain`).
   */
  readonly leavesAt: number | null;
  /** Trajectories that currently stick to it: the tie-breaker that spreads idle trajectories. */
  readonly stickyCount: number;
  readonly deadReason: string | null;
}

export interface EngineSpec {
  id: string;
  machineId?: string;
  baseUrl: string;
  /** Default vLLM, whose API the router's callers speak. */
  kind?: EngineKind;
  weightVersion?: number;
}

/**
 * The selection rule, without I/O (docs/router.md "Routing for the cache"): the sticky engine if it is
 * alive (its KV cache holds the trajectory's prefix); else, for a trajectory, its engine by rendezvous
 * hashing — the same on every router replica, so all of a trajectory's turns meet one engine wherever
 * they enter — passing over an engine loaded beyond `loadBound` (consistent hashing with bounded loads:
 * imbalance stays bounded while most trajectories keep their engine); a
 * request of no trajectory goes to the least loaded. Ties go to the engine with fewer sticky
 * trajectories, then to the smaller id, so the choice is reproducible.
 */
export function selectEngine(
  engines: readonly EngineView[],
  options: { stickyId?: string; exclude?: ReadonlySet<string>; key?: string | null } = {},
): EngineView | undefined {
  const usable = engines.filter((e) => e.alive && e.leavesAt === null && !options.exclude?.has(e.id));
  const sticky = options.stickyId === undefined ? undefined : usable.find((e) => e.id === options.stickyId);
  if (sticky) return sticky;
  if (options.key !== undefined && options.key !== null && usable.length > 1) {
    const bound = loadBound(
      usable.reduce((sum, e) => sum + e.inFlight, 0),
      usable.length,
    );
    const ranked = usable.map((e) => ({ e, score: rendezvousScore(options.key!, e.id) })).sort((a, b) => b.score - a.score || (a.e.id < b.e.id ? -1 : 1));
    const fit = ranked.find(({ e }) => e.inFlight + 1 <= bound);
    if (fit) return fit.e;
  }
  let best: EngineView | undefined;
  for (const e of usable) {
    if (
      !best ||
      e.inFlight < best.inFlight ||
      (e.inFlight === best.inFlight && (e.stickyCount < best.stickyCount || (e.stickyCount === best.stickyCount && e.id < best.id)))
    ) {
      best = e;
    }
  }
  return best;
}

/** How far above the mean an engine's load may be before a trajectory placed by its hash passes it over (1.25: 25 %)... */
export const LOAD_BOUND = 1.25;
/** ...and by at least this many requests: a few requests more is noise, not imbalance (SGLang's cache-aware policy has an absolute threshold too). */
export const LOAD_SLACK = 8;

/** The most requests an engine may carry, the new one counted, and still take a trajectory its hash places there. */
export function loadBound(inFlight: number, engines: number): number {
  const mean = (inFlight + 1) / engines;
  return Math.ceil(Math.max(LOAD_BOUND * mean, mean + LOAD_SLACK));
}

/** A trajectory's score on an engine: the engine with the highest is its own (FNV-1a, then a finaliser to spread the bits). */
export function rendezvousScore(key: string, engineId: string): number {
  let h = 0x811c9dc5;
  const text = `${key}\u0000${engineId}`;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A request's hold on an engine: counts toward its load until released (once). */
export interface EngineLease {
  readonly engine: EngineView;
  /**
   * Aborted when the engine leaves the pool or moves to another address while the request is on it: a
   * request there waits on a process that is no longer the engine (one shutting down may hold its
   * connections open for good), so it fails over now rather than after the idle timeout.
   */
  readonly left: AbortSignal;
  release(): void;
}

/**
 * Is the engine alive? `deep`: it is out of selection after a failure, and must prove it generates —
 * not only that its HTTP thread answers /health, which a wedged engine still does — before it is back.
 */
export type ProbeFn = (engine: EngineView, timeoutMs: number, deep: boolean) => Promise<boolean>;

export interface EnginePoolOptions {
  /** Period of the liveness probe of every engine; 0 disables the timer (probes still run after failures). */
  probeIntervalMs?: number;
  probeTimeoutMs?: number;
  /**
   * Failed periodic probes in a row that take a living engine out of selection (default 2). One /health that misses
   * its timeout on a loaded host is weak evidence, and taking the engine out moves its trajectories off
   * their KV cache for good; a request that fails on the engine still takes it out at once (markDead).
   */
  probeFailuresToLeave?: number;
  /** Sticky assignments kept; the oldest are forgotten beyond it (a finished trajectory never says so), a hundredth at a time. */
  maxStickyTrajectories?: number;
  probe?: ProbeFn;
  onChange?: (engine: EngineView, change: 'dead' | 'alive') => void;
}

interface EngineRecord {
  id: string;
  machineId: string;
  baseUrl: string;
  kind: EngineKind;
  weightVersion: number;
  inFlight: number;
  alive: boolean;
  stickyCount: number;
  deadReason: string | null;
  leavesAt: number | null;
  /** Failed probes since the last one that passed (probeFailuresToLeave). */
  failedProbes: number;
  /** Aborted when this engine, at this address, leaves the pool (EngineLease.left). */
  left: AbortController;
  /** While draining: removes it at the drain's deadline. */
  leaveTimer: NodeJS.Timeout | null;
}

// eslint-disable-next-line @typescript-eslint/no-unused-vars -- `left`, `failedProbes` and `leaveTimer` are the pool's own, not a view's
const viewOf = ({ left, failedProbes, leaveTimer, ...view }: EngineRecord): EngineView => view;

/** The rollout engines the router may use, their load, liveness, and the sticky trajectory map. */
export class EnginePool {
  private readonly engines = new Map<string, EngineRecord>();
  private readonly sticky = new Map<string, string>();
  private readonly probing = new Map<string, Promise<boolean>>();
  private timer: NodeJS.Timeout | null = null;
  private readonly probeFn: ProbeFn;
  private readonly probeTimeoutMs: number;
  private readonly maxSticky: number;
  private readonly probeFailuresToLeave: number;

  constructor(
    specs: readonly EngineSpec[] = [],
    private readonly options: EnginePoolOptions = {},
  ) {
    this.probeFn = options.probe ?? httpProbe;
    this.probeTimeoutMs = options.probeTimeoutMs ?? 1_000;
    this.maxSticky = options.maxStickyTrajectories ?? 100_000;
    this.probeFailuresToLeave = Math.max(1, options.probeFailuresToLeave ?? 2);
    for (const s of specs) this.add(s);
  }

  add(spec: EngineSpec): void {
    const existing = this.engines.get(spec.id);
    if (existing) {
      const baseUrl = spec.baseUrl.replace(/\/+$/, '');
      if (baseUrl !== existing.baseUrl) {
        existing.left.abort(new Error(`engine ${spec.id} moved from ${existing.baseUrl} to ${baseUrl}`));
        existing.left = new AbortController();
      }
      existing.baseUrl = baseUrl;
      existing.kind = spec.kind ?? existing.kind;
      existing.weightVersion = spec.weightVersion ?? existing.weightVersion;
      // Added again: its machine serves again (registered anew), so it is no longer leaving.
      this.stopDraining(existing);
      return;
    }
    this.engines.set(spec.id, {
      id: spec.id,
      machineId: spec.machineId ?? spec.id,
      baseUrl: spec.baseUrl.replace(/\/+$/, ''),
      kind: spec.kind ?? 'vllm',
      weightVersion: spec.weightVersion ?? 0,
      inFlight: 0,
      alive: true,
      stickyCount: 0,
      deadReason: null,
      failedProbes: 0,
      left: new AbortController(),
      leavesAt: null,
      leaveTimer: null,
    });
  }

  remove(id: string): void {
    const e = this.engines.get(id);
    if (e) this.stopDraining(e);
    e?.left.abort(new Error(`engine ${id} left the pool`));
    this.engines.delete(id);
    for (const [trajectoryId, engineId] of this.sticky) if (engineId === id) this.sticky.delete(trajectoryId);
  }

  /**
   * Its machine is leaving at a known time (docs/planned-failures.md): the engine takes no new request
   * from now — its trajectories go elsewhere from their next turn — and keeps the requests it holds
   * until `leaveAtMs`, when it is removed (the requests still on it then fail over, continued at the
   * token level), or until it holds none. Draining again keeps the earlier deadline.
   */
  drain(id: string, leaveAtMs: number, now = Date.now()): void {
    const e = this.engines.get(id);
    if (!e || e.leavesAt !== null) return;
    if (e.inFlight === 0 || leaveAtMs <= now) return this.remove(id);
    e.leavesAt = leaveAtMs;
    for (const [trajectoryId, engineId] of this.sticky) if (engineId === id) this.forget(trajectoryId);
    e.leaveTimer = setTimeout(() => this.remove(id), leaveAtMs - now);
    e.leaveTimer.unref();
  }

  private stopDraining(e: EngineRecord): void {
    if (e.leaveTimer) clearTimeout(e.leaveTimer);
    e.leaveTimer = null;
    e.leavesAt = null;
  }

  setWeightVersion(id: string, weightVersion: number): void {
    const e = this.engines.get(id);
    if (e) e.weightVersion = weightVersion;
  }

  snapshot(): EngineView[] {
    return [...this.engines.values()].map(viewOf);
  }

  get(id: string): EngineView | undefined {
    const e = this.engines.get(id);
    return e ? viewOf(e) : undefined;
  }

  stickyEngineOf(trajectoryId: string): string | undefined {
    return this.sticky.get(trajectoryId);
  }

  /** Select without taking a lease (no load counted, stickiness unchanged). */
  pick(trajectoryId: string | null, exclude?: ReadonlySet<string>): EngineView | undefined {
    const stickyId = trajectoryId === null ? undefined : this.sticky.get(trajectoryId);
    return selectEngine(this.snapshot(), { stickyId, exclude, key: trajectoryId });
  }

  /** Select an engine, count the request on it, and (for a trajectory) make it the sticky one. */
  acquire(trajectoryId: string | null, exclude?: ReadonlySet<string>): EngineLease | undefined {
    const chosen = this.pick(trajectoryId, exclude);
    if (!chosen) return undefined;
    const record = this.engines.get(chosen.id)!;
    if (trajectoryId !== null) this.stick(trajectoryId, record);
    record.inFlight += 1;
    let released = false;
    return {
      engine: viewOf(record),
      left: record.left.signal,
      release: () => {
        if (released) return;
        released = true;
        record.inFlight = Math.max(0, record.inFlight - 1);
        // A leaving engine goes as soon as it holds nothing more.
        if (record.leavesAt !== null && record.inFlight === 0 && this.engines.get(record.id) === record) this.remove(record.id);
      },
    };
  }

  /**
   * Make `engineId` the trajectory's engine, e.g. where the rollout manager reassigned it after its
   * rollout stopped serving. An unknown engine leaves the assignment as it is.
   */
  assign(trajectoryId: string, engineId: string): void {
    const record = this.engines.get(engineId);
    if (record) this.stick(trajectoryId, record);
  }

  /** The engines running on a machine (one per DP rank at most). */
  enginesOn(machineId: string): EngineView[] {
    return this.snapshot().filter((e) => e.machineId === machineId);
  }

  /** The trajectory finished: its engine no longer needs to keep its prefix warm. */
  forget(trajectoryId: string): void {
    const engineId = this.sticky.get(trajectoryId);
    if (engineId === undefined) return;
    this.sticky.delete(trajectoryId);
    const e = this.engines.get(engineId);
    if (e) e.stickyCount = Math.max(0, e.stickyCount - 1);
  }

  /**
   * Take the engine out of selection at once (fail fast), then probe it: a transient failure (a reset
   * connection on a healthy server) brings it straight back; a dead machine stays out until a periodic
   * probe succeeds.
   */
  markDead(id: string, reason: string): void {
    const e = this.engines.get(id);
    if (!e) return;
    const wasAlive = e.alive;
    e.alive = false;
    e.deadReason = reason;
    if (wasAlive) this.options.onChange?.(viewOf(e), 'dead');
    void this.probe(id);
  }

  /**
   * Probe one engine and set its liveness from the answer. Concurrent probes of one engine share one
   * request. `check`: a trajectory is about to go there (after a tool iteration, a failed request), so one
   * failed probe takes it out; `periodic`: the background sweep, which needs probeFailuresToLeave in a row.
   */
  probe(id: string, mode: 'check' | 'periodic' = 'check'): Promise<boolean> {
    const shared = this.probing.get(id) ?? this.probeOnce(id);
    return shared.then((ok) => {
      const current = this.engines.get(id);
      if (!current) return false;
      if (!ok && current.alive && current.failedProbes >= (mode === 'check' ? 1 : this.probeFailuresToLeave)) {
        current.alive = false;
        current.deadReason = 'liveness probe failed';
        this.options.onChange?.(viewOf(current), 'dead');
      }
      return ok;
    });
  }

  /** One probe request: counts a failure, or brings a dead engine back. */
  private probeOnce(id: string): Promise<boolean> {
    const e = this.engines.get(id);
    if (!e) return Promise.resolve(false);
    const p = this.probeFn(viewOf(e), this.probeTimeoutMs, !e.alive)
      .catch(() => false)
      .then((ok) => {
        this.probing.delete(id);
        const current = this.engines.get(id);
        if (!current) return false;
        current.failedProbes = ok ? 0 : current.failedProbes + 1;
        if (ok && !current.alive) {
          current.alive = true;
          current.deadReason = null;
          this.options.onChange?.(viewOf(current), 'alive');
        }
        return ok;
      });
    this.probing.set(id, p);
    return p;
  }

  probeAll(mode: 'check' | 'periodic' = 'check'): Promise<boolean[]> {
    return Promise.all([...this.engines.keys()].map((id) => this.probe(id, mode)));
  }

  probeDead(): Promise<boolean[]> {
    return Promise.all([...this.engines.values()].filter((e) => !e.alive).map((e) => this.probe(e.id)));
  }

  startProbing(): void {
    const every = this.options.probeIntervalMs ?? 5_000;
    if (this.timer || every <= 0) return;
    this.timer = setInterval(() => void this.probeAll('periodic'), every);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const e of this.engines.values()) if (e.leaveTimer) clearTimeout(e.leaveTimer);
    await Promise.all([...this.probing.values()]);
  }

  private stick(trajectoryId: string, record: EngineRecord): void {
    const previous = this.sticky.get(trajectoryId);
    if (previous !== undefined) {
      this.sticky.delete(trajectoryId);
      const p = this.engines.get(previous);
      if (p) p.stickyCount = Math.max(0, p.stickyCount - 1);
    }
    // Re-inserting moves the trajectory to the end of the map's order: the oldest entry is the least recently used.
    this.sticky.set(trajectoryId, record.id);
    record.stickyCount += 1;
    evictOldest(this.sticky, this.maxSticky, (oldest) => this.forget(oldest));
  }
}
