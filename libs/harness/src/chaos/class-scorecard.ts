import type { MessageOf, RobustrlMessage } from '@robustrl/contracts';
import type { FaultKind } from './fault-schedule';

/**
 * The campaign's scorecard per fault class: for each kind of fault, how many were injected, how long the
 * control plane took to detect them and to recover (p50 / max), the work they cost (trajectories
 * generated again, steps trained again) and the GPU time they lost (the ETTR ledger's rows of their
 * outages). What a fault caused is what happened from its injection until the next one: the verdicts
 * confirmed in that span, the recoveries decided on them, the ledger rows of those outages. Pure.
 */

export interface InjectedAt {
  kind: FaultKind;
  target: string;
  /** ms since the epoch. */
  at: number;
}

/** One row of the ETTR ledger (the controller's `downtimeLedger`): the GPU-hours an outage lost on a machine. */
export interface LedgerRow {
  outageId: string | null;
  gpuHours: number;
  decisionRule?: string | null;
}

export interface ClassRow {
  kind: FaultKind;
  count: number;
  /** Verdicts confirmed, and the rules decided on them (not report-only), with their counts. */
  verdicts: number;
  decisions: Record<string, number>;
  /** Seconds from the fault's evidence to its verdict, p50 and max over the class's verdicts. */
  detectSeconds: { p50: number; max: number } | null;
  /** Seconds from the fault's evidence to its recovery's completion, p50 and max over its completed recoveries. */
  recoverSeconds: { p50: number; max: number } | null;
  /**
   * Seconds from the fault's evidence to each decision on it (a re-plan and an escalation included), p50
   * and max: a decision waiting on a command timeout shows here, where the recovery's own time also
   * counts the task restart an escalation leads to.
   */
  decideSeconds: { p50: number; max: number } | null;
  regeneratedTrajectories: number;
  /** Steps begun again after a fault (a rank starting a step it had started; once per retry of the group). */
  retriedSteps: number;
  gpuHoursLost: number;
}

const round1 = (x: number) => Math.round(x * 10) / 10;
function spread(xs: number[]): { p50: number; max: number } | null {
  if (xs.length === 0) return null;
  const sorted = [...xs].sort((a, b) => a - b);
  return { p50: round1(sorted[Math.floor((sorted.length - 1) / 2)]), max: round1(sorted[sorted.length - 1]) };
}

export function classScorecard(injected: readonly InjectedAt[], events: readonly RobustrlMessage[], ledger: readonly LedgerRow[]): ClassRow[] {
  const faults = injected.filter((f) => f.target !== 'none').sort((a, b) => a.at - b.at);
  // A verdict a second before the injection was logged belongs to it (the injection is logged after the kill).
  const slackMs = 1_500;
  const spanOf = (t: number): number => {
    let owner = -1;
    for (let i = 0; i < faults.length; i++) if (faults[i].at - slackMs <= t) owner = i;
    return owner;
  };
  const rows = new Map<FaultKind, ClassRow>();
  const rowOf = (kind: FaultKind): ClassRow => {
    let row = rows.get(kind);
    if (!row) {
      row = {
        kind,
        count: 0,
        verdicts: 0,
        decisions: {},
        detectSeconds: null,
        recoverSeconds: null,
        decideSeconds: null,
        regeneratedTrajectories: 0,
        retriedSteps: 0,
        gpuHoursLost: 0,
      };
      rows.set(kind, row);
    }
    return row;
  };
  for (const f of faults) rowOf(f.kind).count++;

  const detect = new Map<FaultKind, number[]>();
  const recover = new Map<FaultKind, number[]>();
  const decide = new Map<FaultKind, number[]>();
  const verdictSpan = new Map<string, { kind: FaultKind; evidenceAt: number }>();
  const completed = new Map<string, number>();
  for (const m of events) if (m.type === 'RecoveryCompleted') completed.set(m.data.recoveryId, Date.parse(m.occurredAt));
  /** Per step, how often each rank (its agent, the source) started it, and the retries counted. */
  const begun = new Map<number, Map<string, number>>();
  const retries = new Map<number, number>();
  const recoveredOnce = new Set<string>();
  for (const m of events) {
    const t = Date.parse(m.occurredAt);
    const owner = spanOf(t);
    if (m.type === 'TrainingStepStarted') {
      // Every rank announces the step: a retry is a rank starting it again (the group's, counted once).
      const step = (m as MessageOf<'TrainingStepStarted'>).data.step;
      const byRank = begun.get(step) ?? new Map<string, number>();
      begun.set(step, byRank);
      const again = (byRank.get(m.source) ?? 0) + 1;
      byRank.set(m.source, again);
      if (again - 1 > (retries.get(step) ?? 0)) {
        retries.set(step, again - 1);
        if (owner >= 0) rowOf(faults[owner].kind).retriedSteps++;
      }
      continue;
    }
    if (owner < 0) continue;
    const kind = faults[owner].kind;
    if (m.type === 'FaultConfirmed') {
      const v = (m as MessageOf<'FaultConfirmed'>).data;
      if (verdictSpan.has(v.verdictId)) continue;
      verdictSpan.set(v.verdictId, { kind, evidenceAt: t - v.detectionLatencyMs });
      rowOf(kind).verdicts++;
      detect.set(kind, [...(detect.get(kind) ?? []), v.detectionLatencyMs / 1000]);
    } else if (m.type === 'RecoveryDecided') {
      const d = (m as MessageOf<'RecoveryDecided'>).data;
      const origin = verdictSpan.get(d.verdictId);
      if (!origin || d.action === 'report-only') continue;
      const row = rowOf(origin.kind);
      row.decisions[d.rule] = (row.decisions[d.rule] ?? 0) + 1;
      decide.set(origin.kind, [...(decide.get(origin.kind) ?? []), (t - origin.evidenceAt) / 1000]);
      const done = completed.get(d.recoveryId);
      // A recovery re-decided (a re-plan) counts once, from its first decision.
      if (done !== undefined && !recoveredOnce.has(d.recoveryId)) {
        recoveredOnce.add(d.recoveryId);
        recover.set(origin.kind, [...(recover.get(origin.kind) ?? []), (done - origin.evidenceAt) / 1000]);
      }
    } else if (m.type === 'TrajectoryRestartedFromPrompt') rowOf(kind).regeneratedTrajectories++;
  }
  for (const r of ledger) {
    const origin = r.outageId ? verdictSpan.get(r.outageId) : undefined;
    if (origin) rowOf(origin.kind).gpuHoursLost += r.gpuHours;
  }
  for (const row of rows.values()) {
    row.detectSeconds = spread(detect.get(row.kind) ?? []);
    row.recoverSeconds = spread(recover.get(row.kind) ?? []);
    row.decideSeconds = spread(decide.get(row.kind) ?? []);
    row.gpuHoursLost = Math.round(row.gpuHoursLost * 10_000) / 10_000;
  }
  return [...rows.values()].sort((a, b) => a.kind.localeCompare(b.kind));
}
/** The per-class table as markdown. */
export function formatClassScorecard(rows: readonly ClassRow[]): string {
  const s = (x: { p50: number; max: number } | null) => (x ? `${x.p50} / ${x.max}` : 'n/a');
  return [
    '| fault class | injected | verdicts | decisions (rule: count) | detect s (p50 / max) | recover s (p50 / max) | trajectories regenerated | steps retried | GPU-h lost |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.kind} | ${r.count} | ${r.verdicts} | ${
          Object.entries(r.decisions)
            .map(([k, n]) => `${k}: ${n}`)
            .join(', ') || '—'
        } | ${s(r.detectSeconds)} | ${s(r.recoverSeconds)} | ${r.regeneratedTrajectories} | ${r.retriedSteps} | ${r.gpuHoursLost} |`,
    ),
  ].join('\n');
}
