import type { DecisionRule, Evidence } from '@robustrl/contracts';

/**
 * A machine that announced its departure: a drain, a preemption or maintenance notice (the verdict's
 * signal is `node-draining`; docs/planned-failures.md). It is replaced as a machine that must go is —
 * a rollout by a new machine, a trainer by a warm standby or a new machine — but the escalation rules
 * (paper §5.1.2 rules 1 and 2) do not apply to it: they look for a fault of code or configuration that a
 * role restart would only repeat, and a notice is neither. A drain in the first iteration therefore moves
 * one role instead of restarting the task.
 */
export function plannedDeparture(evidence: Evidence, handledAs: 'trainer' | 'rollout'): DecisionRule | null {
  if (evidence.signal !== 'node-draining') return null;
  return handledAs === 'trainer' ? 'planned-trainer-departure' : 'planned-rollout-departure';
}

/**
 * The decision's evidence, with how long the machine had left when it was decided: what a plan made
 * before the deadline can do (a notice with no deadline, or one already past, says so).
 */
export function departureEvidence(evidence: Evidence, now: number): Evidence {
  const deadline = evidence.departsAt === undefined ? Number.NaN : Date.parse(evidence.departsAt);
  const left = Number.isNaN(deadline)
    ? 'no deadline given'
    : deadline > now
      ? `departs in ${Math.round((deadline - now) / 1000)} s`
      : `its deadline passed ${Math.round((now - deadline) / 1000)} s before the decision`;
  return { ...evidence, detail: `planned departure, ${left}; ${evidence.detail ?? 'node-draining'}` };
}
