import { Gauge, Registry } from 'prom-client';

/** What the gauges show of one job at scrape time. */
export interface EttrJobSample {
  jobId: string;
  /** ETTR since the job started, 0..1. */
  ettr: number;
  /** ETTR over the last whole sliding window; null until one window has passed. */
  sliding: number | null;
  /** GPU-hours lost, summed per (category, action); action `none` for start-up (no outage). */
  downtime: Array<{ category: string; action: string; gpuHours: number }>;
}

/**
 * `robustrl_ettr{job_id}`, `robustrl_ettr_sliding{job_id}`, `robustrl_downtime_gpu_hours{job_id,category,action}`,
 * in the controller's own registry (so its existing /metrics serves them).
 *
 * The values are computed when scraped (`collect`), not pushed per event: ETTR changes with every
 * passing second even without events (time is accounted up to now), and folding stays free of
 * metric bookkeeping. All three gauges' collect() run synchronously within one `registry.metrics()`
 * call, so one sample of all jobs is taken per scrape and shared until the next microtask.
 */
export function registerEttrGauges(registry: Registry, sample: () => EttrJobSample[]): void {
  let cached: EttrJobSample[] | null = null;
  const samples = (): EttrJobSample[] => {
    if (cached === null) {
      cached = sample();
      queueMicrotask(() => (cached = null));
    }
    return cached;
  };
  new Gauge({
    name: 'robustrl_ettr',
    help: 'Effective training time ratio since the job started: effective GPU time / GPU time (0..1)',
    labelNames: ['job_id'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of samples()) this.set({ job_id: s.jobId }, s.ettr);
    },
  });
  new Gauge({
    name: 'robustrl_ettr_sliding',
    help: 'Effective training time ratio over the last whole sliding window (ROBUSTRL_ETTR_WINDOW_SECONDS)',
    labelNames: ['job_id'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of samples()) if (s.sliding !== null) this.set({ job_id: s.jobId }, s.sliding);
    },
  });
  new Gauge({
    name: 'robustrl_downtime_gpu_hours',
    help: 'GPU-hours not effective since the job started, by downtime category and the recovery action of the outage',
    labelNames: ['job_id', 'category', 'action'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of samples()) for (const d of s.downtime) this.set({ job_id: s.jobId, category: d.category, action: d.action }, d.gpuHours);
    },
  });
}
