import { BadRequestException, Controller, Get, Inject, NotFoundException, Param, Query } from '@nestjs/common';
import { describeDowntime, downtimeLedger, ettrReport, slidingEttr } from '@robustrl/ettr';
import { EttrProjector } from './ettr-projector';
import { parseWindowSeconds } from './ettr-settings';

/**
 * The ETTR read model over HTTP (paper §7): per job, the effective training time ratio, where the rest
 * of the GPU time went (downtime ledger by category and recovery action), recovery latency per stage,
 * and the sliding ETTR series. Every read accounts time up to now, so a job in the middle of an
 * outage reads as losing time even before its next event.
 */
@Controller('v1')
export class EttrController {
  constructor(@Inject(EttrProjector) private readonly projector: EttrProjector) {}

  /** Every job seen on the bus since this controller started (rebuilt from the beginning of the topics). */
  @Get('jobs')
  jobs() {
    const now = this.projector.currentTime();
    return this.projector.jobIds().flatMap((jobId) => {
      const view = this.projector.viewOf(jobId, now);
      if (!view) return [];
      const r = ettrReport(view);
      return [{ jobId, mode: r.mode, ettr: r.ettr, wallClockSeconds: r.wallClockSeconds }];
    });
  }

  /** `?windowSeconds=N` picks the sliding window (a multiple of the sample period); default ROBUSTRL_ETTR_WINDOW_SECONDS. */
  @Get('jobs/:jobId/ettr')
  ettr(@Param('jobId') jobId: string, @Query('windowSeconds') windowSeconds?: unknown) {
    const window = parseWindowSeconds(windowSeconds, this.projector.settings);
    if ('error' in window) throw new BadRequestException({ error: window.error });
    const view = this.projector.viewOf(jobId);
    if (!view) throw new NotFoundException({ error: `no ETTR for job '${jobId}': none of its events has been seen on the bus` });
    const report = ettrReport(view);
    return {
      ...report,
      // A job whose JobStarted is not (or no longer, after topic retention) on the bus has no jobId in its view.
      jobId,
      summary: describeDowntime(report),
      slidingWindowSeconds: window.windowMs / 1000,
      sampleSeconds: this.projector.settings.sampleMs / 1000,
      slidingEttr: slidingEttr(view, window.windowMs),
      downtimeLedger: downtimeLedger(view),
      // Events that arrived after later ones were accounted: non-zero means the split is approximate.
      lateEvents: this.projector.jobs.lateEvents(jobId),
    };
  }
}
