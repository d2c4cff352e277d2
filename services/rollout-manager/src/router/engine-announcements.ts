import { MessageBus, Subscription } from '@robustrl/bus';
import { createMessage, DataOf, Topics } from '@robustrl/contracts';
import { EnginePool, EngineSpec } from './engine-pool';
import { RouterLogger } from './router-reporting';

/**
 * How router replicas share one pool of engines without sharing memory (docs/router.md "Scaling out").
 * The rollout manager's router — the one whose pool follows the rollout pool's decisions — announces its
 * engines (RouterEnginesAnnounced) when they change and every `periodMs`; each replica adopts the last
 * announcement as its pool, keeping only its own liveness probes and load counts. A replica never
 * decides which engines exist, so two replicas never disagree for longer than an announcement takes.
 */

type AnnouncedEngine = DataOf<'RouterEnginesAnnounced'>['engines'][number];

const fingerprint = (engines: readonly AnnouncedEngine[]) => JSON.stringify(engines.map((e) => [e.engineId, e.url, e.kind, e.weightVersion, e.leavesAt]));

/** The announcing side, in the rollout manager's router. */
export class EngineAnnouncer {
  private timer?: NodeJS.Timeout;
  private last = '';
  private lastAt = 0;

  constructor(
    private readonly bus: MessageBus,
    private readonly jobId: string,
    private readonly pool: EnginePool,
    private readonly log: RouterLogger,
    private readonly options: { periodMs?: number; checkEveryMs?: number; now?: () => number } = {},
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tick(), this.options.checkEveryMs ?? 500);
    this.timer.unref();
    void this.tick();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Announce when the engines changed, or when the period passed since the last announcement. */
  async tick(): Promise<void> {
    const now = (this.options.now ?? Date.now)();
    const engines: AnnouncedEngine[] = this.pool.snapshot().map((e) => ({
      engineId: e.id,
      machineId: e.machineId,
      url: e.baseUrl,
      kind: e.kind,
      weightVersion: e.weightVersion,
      ...(e.leavesAt !== null ? { leavesAt: new Date(e.leavesAt).toISOString() } : {}),
    }));
    const print = fingerprint(engines);
    if (print === this.last && now - this.lastAt < (this.options.periodMs ?? 5_000)) return;
    try {
      await this.bus.publish(
        createMessage(
          'RouterEnginesAnnounced',
          { engines, announcedAt: new Date(now).toISOString() },
          { jobId: this.jobId, source: 'rollout-manager/router', occurredAt: new Date(now).toISOString() },
        ),
      );
      this.last = print;
      this.lastAt = now;
    } catch (err) {
      // Asked again at the next check: replicas keep their last pool meanwhile.
      this.log.warn('could not announce the engines to router replicas', { error: String(err) });
    }
  }
}

/** The following side, in a router replica (ROBUSTRL_ROUTER_REPLICA=on). */
export class EngineFollower {
  private subscription?: Subscription;
  /** Announcements adopted (tests and logs read it). */
  adopted = 0;

  constructor(
    private readonly bus: MessageBus,
    private readonly jobId: string,
    private readonly pool: EnginePool,
    /** The replica's own listed engines (ROBUSTRL_ROUTER_ENGINES): kept whatever is announced. */
    private readonly listed: readonly EngineSpec[],
    private readonly log: RouterLogger,
    /** Its consumer group: its own (every replica reads every announcement), stable across its restarts. */
    private readonly groupId: string,
  ) {}

  async start(): Promise<void> {
    this.subscription = await this.bus.subscribe({
      groupId: this.groupId,
      topics: [Topics.membership],
      types: ['RouterEnginesAnnounced'],
      handler: async ({ message }) => {
        if (message.type !== 'RouterEnginesAnnounced' || message.jobId !== this.jobId) return;
        this.adopt(message.data.engines);
      },
    });
  }

  async stop(): Promise<void> {
    await this.subscription?.close();
  }

  /**
   * The pool becomes the announced engines (and the listed ones); counts and liveness of those kept stay.
   * A leaving engine drains here as in the rollout manager's router: kept for this replica's requests on
   * it, never added anew.
   */
  adopt(engines: readonly AnnouncedEngine[]): void {
    const keep = new Set([...engines.map((e) => e.engineId), ...this.listed.map((e) => e.id)]);
    for (const e of this.pool.snapshot()) if (!keep.has(e.id)) this.pool.remove(e.id);
    for (const e of engines) {
      if (e.leavesAt !== undefined) {
        if (this.pool.get(e.engineId)) this.pool.drain(e.engineId, Date.parse(e.leavesAt));
        continue;
      }
      this.pool.add({ id: e.engineId, machineId: e.machineId, baseUrl: e.url, kind: e.kind, weightVersion: e.weightVersion });
    }
    if (this.adopted === 0) this.log.info(`following the rollout manager's engines: ${engines.length} announced`);
    this.adopted += 1;
  }
}
