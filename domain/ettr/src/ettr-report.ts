import type { DecisionRule, RecoveryAction } from '@robustrl/contracts';
import { DOWNTIME_CATEGORIES, DowntimeCategory, EttrView, StageSample } from './ettr-view';
import { ledgerEntries } from './time-accounting';

const HOUR_MS = 3_600_000;

/** Effective GPU time / GPU time since the job started; 1 before anything was accounted. */
export function ettrOf(view: EttrView): number {
  return view.totalGpuMs > 0 ? view.effectiveGpuMs / view.totalGpuMs : 1;
}

export interface SlidingPoint {
  /** Seconds since the job started, at the end of the window. */
  atSeconds: number;
  ettr: number;
}

/** ETTR over the last `windowMs` at the end of every sample period (paper Fig. 12), oldest first. */
export function slidingEttr(view: EttrView, windowMs = view.settings.windowMs): SlidingPoint[] {
  const { sampleMs } = view.settings;
  if (windowMs % sampleMs !== 0 || windowMs <= 0) throw new Error(`window ${windowMs} ms is not a positive multiple of the sample period ${sampleMs} ms`);
  const per = windowMs / sampleMs;
  const out: SlidingPoint[] = [];
  const b = view.buckets;
  let eff = 0;
  let tot = 0;
  for (let i = 0; i < b.length; i++) {
    eff += b[i].effectiveGpuMs;
    tot += b[i].totalGpuMs;
    if (i >= per) {
      eff -= b[i - per].effectiveGpuMs;
      tot -= b[i - per].totalGpuMs;
    }
    // Only whole windows (and only periods the clock has passed).
    const end = b[i].startMs + sampleMs;
    if (i + 1 < per || view.clock === null || end > view.clock) continue;
    out.push({ atSeconds: Math.round((end - (view.startedAt ?? 0)) / 1000), ettr: tot > 0 ? round4(Math.max(0, eff) / tot) : 1 });
  }
  return out;
}

export interface DowntimeRow {
  category: DowntimeCategory;
  /** Recovery action of the outage (`restart-trainer-group`, `replace-rollout`, `restart-task`, …); null for startup. */
  action: RecoveryAction | null;
  /** Detection rule that confirmed the fault (`explicit-signal`, `trainer-idle`, `rollout-silent`, …). */
  detectionRule: string | null;
  /** The controller's rule for the outage (`trainer-fault`, `machine-restart-budget-spent`, an escalation's, …); null for startup. */
  decisionRule: DecisionRule | null;
  /** Role the fault was handled as. */
  role: 'trainer' | 'rollout' | null;
  /** The machine the fault was confirmed on. */
  faultMachineId: string | null;
  /** The outage was announced (a drain or preemption notice); false for startup and unannounced faults. */
  planned: boolean;
  outageId: string | null;
  /** The machine whose GPUs were lost. */
  machineId: string;
  gpuHours: number;
}

/** The downtime ledger, one row per (category, outage, machine), largest first (every machine's time up to the clock in). */
export function downtimeLedger(view: EttrView): DowntimeRow[] {
  return ledgerEntries(view)
    .map((e): DowntimeRow => {
      const o = e.outageId ? view.outages[e.outageId] : undefined;
      return {
        category: e.category,
        action: o?.action ?? null,
        detectionRule: o?.detectionRule ?? null,
        decisionRule: o?.decisionRule ?? null,
        role: o?.handledAs ?? null,
        faultMachineId: o?.machineId ?? null,
        planned: o?.planned ?? false,
        outageId: e.outageId,
        machineId: e.machineId,
        gpuHours: round4(e.gpuMs / HOUR_MS),
      };
    })
    .sort(
      (a, b) =>
        b.gpuHours - a.gpuHours ||
        (a.outageId ?? '').localeCompare(b.outageId ?? '') ||
        a.machineId.localeCompare(b.machineId) ||
        a.category.localeCompare(b.category),
    );
}

/** GPU-hours lost, summed by a key of the ledger rows (e.g. by action: "41 to trainer restarts, 3 to rollout replacements"). */
export function downtimeBy<K extends keyof DowntimeRow>(rows: readonly DowntimeRow[], key: K): Array<{ key: DowntimeRow[K]; gpuHours: number }> {
  const sums = new Map<DowntimeRow[K], number>();
  for (const r of rows) sums.set(r[key], (sums.get(r[key]) ?? 0) + r.gpuHours);
  return [...sums.entries()]
    .map(([k, gpuHours]) => ({ key: k, gpuHours: round4(gpuHours) }))
    .sort((a, b) => b.gpuHours - a.gpuHours || String(a.key).localeCompare(String(b.key)));
}

export interface StageStats {
  action: RecoveryAction | null;
  count: number;
  /** Milliseconds per stage: mean and max over the recoveries of this action. */
  detect: { mean: number; max: number };
  decide: { mean: number; max: number };
  restart: { mean: number; max: number };
  reconnect: { mean: number; max: number };
}

/** Recovery latency per stage (detect, decide, restart, reconnect), by recovery action. */
export function recoveryStages(view: EttrView): StageStats[] {
  const groups = new Map<string, StageSample[]>();
  for (const s of view.stages) {
    const k = s.action ?? '';
    groups.set(k, [...(groups.get(k) ?? []), s]);
  }
  const stat = (xs: StageSample[], f: (s: StageSample) => number) => ({
    mean: Math.round(xs.reduce((a, s) => a + f(s), 0) / xs.length),
    max: Math.max(...xs.map(f)),
  });
  return [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([action, xs]) => ({
      action: (action || null) as RecoveryAction | null,
      count: xs.length,
      detect: stat(xs, (s) => s.detect),
      decide: stat(xs, (s) => s.decide),
      restart: stat(xs, (s) => s.restart),
      reconnect: stat(xs, (s) => s.reconnect),
    }));
}

export interface EttrReport {
  jobId: string | null;
  mode: string | null;
  wallClockSeconds: number;
  ettr: number;
  effectiveGpuHours: number;
  totalGpuHours: number;
  steps: number;
  faults: number;
  downtimeByCategory: Array<{ category: DowntimeCategory; gpuHours: number }>;
  downtimeByAction: Array<{ action: string; gpuHours: number }>;
  /** GPU-hours lost to faults announced before they happened (drains, preemption notices) and to the others. */
  downtimeByNotice: { plannedGpuHours: number; unplannedGpuHours: number };
  stages: StageStats[];
}

/** The job's ETTR summary (the HTTP API's and the simulator's shape). */
export function ettrReport(view: EttrView): EttrReport {
  const rows = downtimeLedger(view);
  const byCategory = new Map(downtimeBy(rows, 'category').map((r) => [r.key, r.gpuHours]));
  return {
    jobId: view.jobId,
    mode: view.mode,
    wallClockSeconds: view.startedAt !== null && view.clock !== null ? Math.round((view.clock - view.startedAt) / 1000) : 0,
    ettr: round4(ettrOf(view)),
    effectiveGpuHours: round4(view.effectiveGpuMs / HOUR_MS),
    totalGpuHours: round4(view.totalGpuMs / HOUR_MS),
    steps: view.steps,
    faults: Object.keys(view.outages).length,
    downtimeByCategory: DOWNTIME_CATEGORIES.map((category) => ({ category, gpuHours: byCategory.get(category) ?? 0 })),
    downtimeByAction: downtimeBy(
      rows.filter((r) => r.action !== null),
      'action',
    ).map((r) => ({ action: r.key as string, gpuHours: r.gpuHours })),
    downtimeByNotice: {
      plannedGpuHours: round4(rows.filter((r) => r.outageId !== null && r.planned).reduce((s, r) => s + r.gpuHours, 0)),
      unplannedGpuHours: round4(rows.filter((r) => r.outageId !== null && !r.planned).reduce((s, r) => s + r.gpuHours, 0)),
    },
    stages: recoveryStages(view),
  };
}

/** "lost 41.0 GPU-hours to restart-trainer-group, 3.0 to replace-rollout" */
export function describeDowntime(report: EttrReport): string {
  if (report.downtimeByAction.length === 0) return 'no GPU time lost to faults';
  const [first, ...rest] = report.downtimeByAction;
  return [`lost ${first.gpuHours.toFixed(1)} GPU-hours to ${first.action}`, ...rest.map((r) => `${r.gpuHours.toFixed(1)} to ${r.action}`)].join(', ');
}

function round4(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}
