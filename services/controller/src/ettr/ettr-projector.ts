import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy, Optional } from '@nestjs/common';
import { MessageBus, Subscription } from '@robustrl/bus';
import { TopicName, topicOf } from '@robustrl/contracts';
import { downtimeLedger, ETTR_INPUT_TYPES, ettrOf, EttrSettings, EttrView, slidingEttr } from '@robustrl/ettr';
import { CLOCK, MESSAGE_BUS } from '@robustrl/service-kit';
import { RecoveryMetrics } from '../metrics/recovery-metrics';
import { DEFAULT_EVENT_ORDERING, EttrJobs, EventOrdering } from './ettr-jobs';
import { EttrJobSample, registerEttrGauges } from './ettr-metrics';
import { ettrSettingsFromEnv } from './ettr-settings';

/** The topics that carry the ETTR inputs (from the catalog, so a type moving topic needs no change here). */
export const ETTR_TOPICS: readonly TopicName[] = [...new Set(ETTR_INPUT_TYPES.map((t) => topicOf(t)))];

/** Overrides for tests and embedders; in a service everything comes from the environment. */
export interface EttrProjectorOptions {
  settings?: EttrSettings;
  /** "Now" for reads: time is accounted from the last event up to it. */
  now?: () => number;
  ordering?: Partial<EventOrdering>;
}
export const ETTR_OPTIONS = Symbol('ETTR_OPTIONS');

/**
 * The ETTR read model of every job the bus carries, kept in memory and served by EttrController
 * and the controller's /metrics.
 *
 * Rebuilt on every start: the subscription uses a consumer group of its own for this process
 * (`robustrl-controller-ettr-<uuid>`), which has no committed offsets and so starts from the
 * beginning of the topics. A fixed group name would resume at the offsets a previous process
 * committed, and this one would hold empty views; one group per process also keeps two controller
 * replicas from splitting the partitions between them (each needs every job). Kafka drops an empty
 * group's offsets after its offsets retention; nothing else is left behind.
 *
 * It decides nothing and writes nothing, so it does not go through the store: losing it costs a replay.
 */
@Injectable()
export class EttrProjector implements OnApplicationBootstrap, OnModuleDestroy {
  readonly settings: EttrSettings;
  readonly jobs: EttrJobs;
  private readonly now: () => number;
  private readonly ordering: Partial<EventOrdering>;
  private readonly logger = new Logger('controller-ettr');
  private subscription?: Subscription;
  private flusher?: NodeJS.Timeout;

  constructor(
    @Inject(MESSAGE_BUS) private readonly bus: MessageBus,
    @Inject(RecoveryMetrics) metrics: RecoveryMetrics,
    @Optional() @Inject(ETTR_OPTIONS) options: EttrProjectorOptions | null,
    @Optional() @Inject(CLOCK) clock: (() => number) | null,
  ) {
    // Invalid settings fail the controller's start with the variable named (see ettr-settings.ts).
    this.settings = options?.settings ?? ettrSettingsFromEnv(process.env);
    // The services' clock (scaled in the main job): reads account time up to it.
    this.now = options?.now ?? clock ?? Date.now;
    this.ordering = options?.ordering ?? {};
    this.jobs = new EttrJobs(
      this.settings,
      this.ordering,
      (err, m) =>
        this.logger.error(`ETTR projection failed on ${m.type} ${m.eventId} of job ${m.jobId}, skipped: ${err instanceof Error ? err.message : String(err)}`),
      (jobId, m) =>
        this.logger.warn(
          `job ${jobId}: ${m.type} at ${m.occurredAt} arrived after later events were accounted; it is applied at the time it arrived (counted in lateEvents)`,
        ),
    );
    registerEttrGauges(metrics.registry, () => this.samples());
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.start();
  }

  async onModuleDestroy(): Promise<void> {
    await this.stop();
  }

  async start(): Promise<void> {
    if (this.subscription) return;
    const groupId = `robustrl-controller-ettr-${randomUUID()}`;
    this.subscription = await this.bus.subscribe({
      groupId,
      topics: ETTR_TOPICS,
      types: ETTR_INPUT_TYPES,
      fromBeginning: true,
      handler: async (delivery) => {
        // Never throw: a throwing handler would be retried and then dead-lettered, and a read model
        // has nothing to gain from either (the record is valid, the bus validated it).
        try {
          this.jobs.accept(delivery.message, delivery.topic, performance.now());
        } catch (err) {
          this.logger.error(
            `ETTR: ${delivery.message.type} ${delivery.message.eventId} of job ${delivery.message.jobId} not accounted: ${err instanceof Error ? err.message : String(err)}`,
          );
        }
      },
    });
    // Quiet streams release waiting events only as time passes, not on a delivery.
    const quietMs = this.ordering.quietMs ?? DEFAULT_EVENT_ORDERING.quietMs;
    this.flusher = setInterval(() => this.jobs.flushAll(performance.now()), Math.max(100, quietMs / 2));
    this.flusher.unref();
    this.logger.log(
      `ETTR: rebuilding from the beginning of ${ETTR_TOPICS.join(', ')} (group ${groupId}); window ${this.settings.windowMs / 1000} s, sample ${this.settings.sampleMs / 1000} s`,
    );
  }

  /** Graceful: the bus waits for the handler in flight. */
  async stop(): Promise<void> {
    clearInterval(this.flusher);
    this.flusher = undefined;
    const subscription = this.subscription;
    this.subscription = undefined;
    await subscription?.close();
  }

  jobIds(): string[] {
    return this.jobs.jobIds();
  }

  /** The job's view accounted up to now (a copy), or undefined for a job none of whose events was seen. */
  viewOf(jobId: string, now = this.now()): EttrView | undefined {
    return this.jobs.viewOf(jobId, now);
  }

  currentTime(): number {
    return this.now();
  }

  private samples(): EttrJobSample[] {
    const now = this.now();
    const out: EttrJobSample[] = [];
    for (const jobId of this.jobs.jobIds()) {
      try {
        const view = this.jobs.viewOf(jobId, now);
        if (!view) continue;
        const sliding = slidingEttr(view);
        const downtime = new Map<string, { category: string; action: string; gpuHours: number }>();
        for (const row of downtimeLedger(view)) {
          const action = row.action ?? 'none';
          const key = `${row.category}|${action}`;
          const d = downtime.get(key) ?? { category: row.category, action, gpuHours: 0 };
          d.gpuHours += row.gpuHours;
          downtime.set(key, d);
        }
        out.push({ jobId, ettr: ettrOf(view), sliding: sliding.length > 0 ? sliding[sliding.length - 1].ettr : null, downtime: [...downtime.values()] });
      } catch (err) {
        // One job's bad state must not take the whole scrape (and the recovery metrics) down.
        this.logger.error(`ETTR metrics of job ${jobId} skipped: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    return out;
  }
}
