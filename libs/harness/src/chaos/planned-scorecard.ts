import type { ClassRow } from './class-scorecard';

/**
 * The planned failures against the unplanned loss of the same machine (docs/planned-failures.md): per
 * role, the GPU time a drain or a preemption cost per fault as a share of what a machine killed without
 * a word cost per fault, and the steps each retried. The issue's bar: a planned drain at most a tenth.
 * Pure; null where the campaign lacks either side.
 */
export interface PlannedComparison {
  role: 'trainer' | 'rollout';
  planned: 'drain' | 'preempt';
  /** GPU-hours lost per fault: the planned kind's, the unplanned loss's. */
  plannedGpuHours: number;
  unplannedGpuHours: number;
  /** planned / unplanned; null when the loss cost nothing. */
  ratio: number | null;
  plannedRetriedSteps: number;
  unplannedRetriedSteps: number;
}

export function plannedAgainstUnplanned(rows: readonly ClassRow[]): PlannedComparison[] {
  const byKind = new Map(rows.map((r) => [r.kind as string, r]));
  const perFault = (r: ClassRow) => r.gpuHoursLost / r.count;
  const out: PlannedComparison[] = [];
  for (const role of ['trainer', 'rollout'] as const) {
    const lost = byKind.get(`kill-${role}-machine`);
    for (const planned of ['drain', 'preempt'] as const) {
      const row = byKind.get(`${planned}-${role}-machine`);
      if (!lost || !row || lost.count === 0 || row.count === 0) continue;
      const unplannedGpuHours = perFault(lost);
      out.push({
        role,
        planned,
        plannedGpuHours: round(perFault(row)),
        unplannedGpuHours: round(unplannedGpuHours),
        ratio: unplannedGpuHours > 0 ? Math.round((perFault(row) / unplannedGpuHours) * 1000) / 1000 : null,
        plannedRetriedSteps: row.retriedSteps,
        unplannedRetriedSteps: lost.retriedSteps,
      });
    }
  }
  return out;
}

const round = (x: number) => Math.round(x * 100_000) / 100_000;

/** The comparison as lines under the class table. */
export function formatPlannedComparison(rows: readonly PlannedComparison[]): string {
  if (rows.length === 0) return '';
  return [
    'planned against unplanned loss of the same machine (GPU-h lost per fault; steps retried):',
    ...rows.map(
      (r) =>
        `  ${r.planned} ${r.role}: ${r.plannedGpuHours} vs ${r.unplannedGpuHours} killed = ${r.ratio === null ? 'n/a' : `${r.ratio}×`}; ` +
        `steps retried ${r.plannedRetriedSteps} vs ${r.unplannedRetriedSteps}`,
    ),
  ].join('\n');
}
