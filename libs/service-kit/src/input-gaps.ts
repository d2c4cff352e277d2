import { Logger } from '@nestjs/common';
import { BusHealth, MessageBus } from '@robustrl/bus';
import { Draft, RobustrlMessage } from '@robustrl/contracts';
import { InputGapHandling, InputWatermark, Reloads } from './deciding-types';
import { InputGap, InputGapMonitor } from './input-gap-monitor';

/** What a deciding consumer's input gaps work with. */
export interface InputGapParts {
  /** How gaps are recorded (`DecidingConsumerSpec.inputGaps`); absent: the input is not watched. */
  handling: InputGapHandling | undefined;
  bus: Pick<MessageBus, 'health'>;
  /** The consumer group whose subscription's health tells whether the input is whole. */
  groupId: string;
  /** The jobs in memory (each is told of a gap). */
  jobs: { readonly size: number; ids(): string[] };
  reloads: Pick<Reloads, 'stale'>;
  isStopped: () => boolean;
  /**
   * Apply an input the host observed for a job (a pause or resume of the gap), once per `cause`:
   * deciding-consumer.ts `applyHostInput`. Rejects when it did not commit.
   */
  record: (jobId: string, input: Draft, cause: string) => Promise<void>;
  /** Run work in turn with the host's other serial work (ticks, snapshots, evictions). */
  inTurn: <T>(work: () => Promise<T>) => Promise<T>;
  clock: () => number;
  logger: Logger;
}

/**
 * A deciding consumer watching its own input (docs/contributors/detection.md "Detection knows when it is blind"): the newest
 * input seen, the monitor that tells from the bus's health when the input has a gap
 * (`input-gap-monitor.ts`), and what of a gap was recorded for each job — a `paused` input when the gap
 * opens (or when a job first speaks during one), a `resumed` one when it closes. Recording is retried
 * on the next sample or tick until it commits.
 */
export class InputGaps implements InputWatermark {
  /** Event time of the newest input seen (restored by a load, written with each snapshot). */
  newestInputAt: number | null = null;
  private gapMonitor?: InputGapMonitor;
  private readonly pausedJobs = new Set<string>();
  private readonly resumesPending = new Map<string, { gap: InputGap; at: number }>();
  private readonly gapRecordingFailed = new Set<string>();
  private sampling = false;

  constructor(private readonly parts: InputGapParts) {}

  /** Whether the input is watched (a monitor runs since `watch`). */
  get watched(): boolean {
    return this.gapMonitor !== undefined;
  }

  /** The open gap, null while the input is whole or not watched. */
  get current(): InputGap | null {
    return this.gapMonitor?.current ?? null;
  }

  /** Start watching (with `handling` only): blind from the newest input the last incarnation applied until this one has caught up. */
  watch(): void {
    if (!this.parts.handling) return;
    const now = this.parts.clock();
    this.gapMonitor = new InputGapMonitor(this.parts.handling.lagToleranceMs, now, this.newestInputAt ?? now);
  }

  /** The newest event time among inputs (capped at now: a producer's clock running ahead must not hide a lag). */
  noteInput(message: RobustrlMessage): void {
    const at = Math.min(Date.parse(message.occurredAt), this.parts.clock());
    if (Number.isFinite(at) && (this.newestInputAt === null || at > this.newestInputAt)) this.newestInputAt = at;
  }

  /** Sample the bus's health now and act on a gap opening or closing (the timer calls it; tests may too). */
  async sample(): Promise<void> {
    if (!this.gapMonitor || this.sampling || this.parts.isStopped()) return;
    this.sampling = true;
    try {
      const health = await this.parts.bus.health().catch((err: unknown) => ({ reachable: false, error: String(err), subscriptions: [] }));
      await this.parts.inTurn(() => this.onInputSample(health));
    } catch (err) {
      this.parts.logger.error(`acting on the input's health failed: ${String(err)}`);
    } finally {
      this.sampling = false;
    }
  }

  private async onInputSample(health: BusHealth): Promise<void> {
    if (this.parts.isStopped()) return;
    const { jobs, logger } = this.parts;
    const monitor = this.gapMonitor!;
    const change = monitor.observe({ health, groupId: this.parts.groupId, newestInputAt: this.newestInputAt }, this.parts.clock());
    if (change?.kind === 'opened') {
      const { gap } = change;
      logger.warn(`input gap (${gap.reason}): ${gap.detail}; time-based decisions paused for ${jobs.size} job(s)`);
      this.pausedJobs.clear();
    } else if (change?.kind === 'closed') {
      const { gap, at } = change;
      logger.log(`input whole again after ${Math.round((at - gap.since) / 1000)} s blind (${gap.reason}); resuming ${jobs.size} job(s)`);
      for (const jobId of new Set([...jobs.ids(), ...this.pausedJobs])) {
        // A resume of an earlier gap still pending (the store was down throughout): no tick ran since its start either.
        const earlier = this.resumesPending.get(jobId)?.gap.since ?? gap.since;
        this.resumesPending.set(jobId, { gap: { ...gap, since: Math.min(earlier, gap.since) }, at });
      }
      this.pausedJobs.clear();
    }
    await this.recordGap();
  }

  /** Record what is due of the current gap for every job: resumes that did not commit yet, pauses of the open gap. */
  async recordGap(): Promise<void> {
    for (const jobId of [...this.resumesPending.keys()]) await this.recordGapFor(jobId);
    if (this.gapMonitor?.current) for (const jobId of this.parts.jobs.ids()) await this.recordGapFor(jobId);
  }

  /** One job's pending resume, then its pause of the open gap; a failure (store down) is retried on the next sample or tick. */
  async recordGapFor(jobId: string): Promise<void> {
    if (this.parts.reloads.stale) return;
    const handling = this.parts.handling!;
    try {
      const resume = this.resumesPending.get(jobId);
      if (resume) {
        await this.parts.record(jobId, handling.resumed(resume.gap, resume.at), `resumed/${resume.gap.since}`);
        this.resumesPending.delete(jobId);
      }
      const gap = this.gapMonitor?.current;
      if (gap && !this.pausedJobs.has(jobId)) {
        await this.parts.record(jobId, handling.paused(gap), `paused/${gap.since}`);
        this.pausedJobs.add(jobId);
      }
      this.gapRecordingFailed.delete(jobId);
    } catch (err) {
      // Once per job until it succeeds: with the store down this is retried every tick for every job.
      if (!this.gapRecordingFailed.has(jobId)) this.parts.logger.warn(`recording the input gap for job ${jobId} failed, retrying: ${String(err)}`);
      this.gapRecordingFailed.add(jobId);
    }
  }

  /** A pending resume, or a pause of the open gap not recorded yet: what `recordGapFor` would write for the job. */
  dueFor(jobId: string): boolean {
    return this.resumesPending.has(jobId) || (this.gapMonitor?.current != null && !this.pausedJobs.has(jobId));
  }

  /** Whether the job's resume did not commit yet: it is still blind, and no tick decides for it. */
  resumePending(jobId: string): boolean {
    return this.resumesPending.has(jobId);
  }
}
