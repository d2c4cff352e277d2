import { performance } from 'node:perf_hooks';
import { MessageBus, Subscription } from '@robustrl/bus';
import { createMessage, DataOf, MessageOf, MessageType, RobustrlMessage, TopicName } from '@robustrl/contracts';
import type { ClusterEnvironment } from '@robustrl/sim';

/**
 * Wall-clock time sped up: one real second is `speedup` seconds of the job. The services' deciders and
 * the emulated cluster read the same clock, so detection windows, restart stages and command timeouts
 * all keep their real lengths in job time while the run takes minutes.
 */
export class ScaledClock {
  private readonly realStart = performance.now();
  readonly startedAt = Date.now();

  constructor(readonly speedup: number) {
    if (!(speedup > 0)) throw new Error(`the speed-up must be positive, got ${speedup}`);
  }

  now(): number {
    return Math.round(this.startedAt + (performance.now() - this.realStart) * this.speedup);
  }

  /** Real milliseconds for `ms` of job time. */
  real(ms: number): number {
    return ms / this.speedup;
  }
}

/**
 * The emulated cluster's world in the main job: the embedded services' own bus, scaled time, real timers.
 * Messages the cluster emits are enveloped and published like an agent's; what the control plane decides
 * comes back through one subscription of the job's topics.
 */
export class LiveClusterEnvironment implements ClusterEnvironment {
  private readonly handlers: Array<{ types: ReadonlySet<string> | null; fn: (m: RobustrlMessage) => void }> = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private subscription: Subscription | null = null;
  private publishing: Promise<unknown> = Promise.resolve();
  private stopped = false;
  /** The first error a handler or timer threw: the run stops and reports it. */
  failure: unknown = null;

  constructor(
    private readonly bus: MessageBus,
    private readonly jobId: string,
    private readonly clock: ScaledClock,
  ) {}

  get now(): number {
    return this.clock.now();
  }

  async start(topics: readonly TopicName[]): Promise<void> {
    this.subscription = await this.bus.subscribe({
      groupId: `embedded-cluster-${this.jobId}`,
      topics: [...topics],
      handler: async (d) => {
        if (d.message.jobId !== this.jobId || this.stopped) return;
        for (const h of this.handlers) if (!h.types || h.types.has(d.message.type)) this.guard(() => h.fn(d.message));
      },
    });
  }

  after(ms: number, fn: () => void): void {
    if (this.stopped) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (!this.stopped) this.guard(fn);
    }, this.clock.real(ms));
    this.timers.add(t);
  }

  subscribe(types: readonly string[] | null, fn: (message: RobustrlMessage) => void): void {
    this.handlers.push({ types: types ? new Set(types) : null, fn });
  }

  emit<T extends MessageType>(type: T, data: DataOf<T>, source: string): MessageOf<T> {
    const m = createMessage(type, data, { jobId: this.jobId, source, occurredAt: new Date(this.now).toISOString() });
    // One after the other, so the job's messages keep their order on each topic.
    this.publishing = this.publishing.then(() => (this.stopped ? undefined : this.bus.publish(m))).catch((e) => this.fail(e));
    return m;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await this.publishing;
    await this.subscription?.close();
  }

  private guard(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.fail(e);
    }
  }

  private fail(e: unknown): void {
    this.failure ??= e;
  }
}
