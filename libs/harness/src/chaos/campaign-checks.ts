import type { MessageOf, RobustrlMessage } from '@robustrl/contracts';
import { DEFAULT_CONTROLLER_SETTINGS } from '@robustrl/controller-domain';
import { everyEscalationNamed, noRecoveryLoop, PartitionSpan, partitionsEndOnce } from './cluster-invariants';
import type { Check } from './system-invariants';
import type { InjectedFault } from './system-scorecard';

/**
 * The whole-system campaign's checks around the job's own (system-chaos.ts): the job finished, every
 * planned fault was injected, and the invariants of faults as clusters have them (cluster-invariants.ts)
 * under the product's restart budgets.
 */
export function campaignChecks(run: {
  finished: boolean;
  agentLoopsExit: number | null | undefined;
  jobSeconds: number;
  committed: number;
  steps: number;
  planned: number;
  injected: readonly InjectedFault[];
  notes: readonly string[];
  jobChecks: readonly Check[];
  events: readonly RobustrlMessage[];
  partitions: readonly PartitionSpan[];
  partitionGraceMs: number;
}): Check[] {
  const injected = run.injected.filter((f) => f.target !== 'none').length;
  return [
    {
      what: 'the job finished',
      ok: run.finished && run.agentLoopsExit === 0,
      detail: run.finished
        ? `in ${run.jobSeconds} s, agent loops exited ${run.agentLoopsExit}`
        : `not within the deadline (${run.committed} of ${run.steps} steps committed)`,
    },
    {
      what: `${run.planned} faults injected`,
      ok: injected === run.planned,
      detail: `${injected} injected${run.notes.length ? `; ${run.notes.join('; ')}` : ''}`,
    },
    ...run.jobChecks,
    noRecoveryLoop(run.events, DEFAULT_CONTROLLER_SETTINGS),
    everyEscalationNamed(run.events),
    partitionsEndOnce(run.events, run.partitions, run.partitionGraceMs),
  ];
}

/** Recoveries by outcome, and decisions by action and rule. */
export function tallyDecisions(events: readonly RobustrlMessage[]): { recoveries: Record<string, number>; decisionsByRule: Record<string, number> } {
  const recoveries: Record<string, number> = {};
  const decisionsByRule: Record<string, number> = {};
  for (const m of events) {
    if (m.type === 'RecoveryCompleted') {
      const o = (m as MessageOf<'RecoveryCompleted'>).data.outcome;
      recoveries[o] = (recoveries[o] ?? 0) + 1;
    }
    if (m.type === 'RecoveryDecided') {
      const d = (m as MessageOf<'RecoveryDecided'>).data;
      const key = `${d.action} (${d.rule})`;
      decisionsByRule[key] = (decisionsByRule[key] ?? 0) + 1;
    }
  }
  return { recoveries, decisionsByRule };
}
