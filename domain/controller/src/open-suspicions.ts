/**
 * The detector's open suspicions per machine (FaultSuspected not yet cleared or confirmed), which the
 * controller keeps for one decision: a rollout under suspicion is no warm standby (paper §5.1.3 lends a
 * healthy one). A machine lost together with the faulty trainer — a rack, a switch — goes silent at
 * the same moment, so at the trainer's verdict it is suspected too, though not yet confirmed; lent, its
 * promotion would fail and count towards rule 3 (two failed restarts restart the task).
 *
 * Immutable, so the indexed controller and its full recomputation fold it with the same functions.
 */
export type OpenSuspicions = Readonly<Record<string, readonly string[]>>;

/** FaultSuspected: `rule` suspects `machineId`. */
export function suspect(open: OpenSuspicions | undefined, machineId: string, rule: string): OpenSuspicions {
  const rules = open?.[machineId] ?? [];
  return rules.includes(rule) ? (open ?? {}) : { ...open, [machineId]: [...rules, rule] };
}

/** SuspicionCleared or FaultConfirmed of `rule`; or, with no rule, a registration (a new incarnation): the suspicion is over. */
export function settle(open: OpenSuspicions | undefined, machineId: string, rule?: string): OpenSuspicions | undefined {
  const rules = open?.[machineId];
  if (!open || !rules) return open;
  const left = rule === undefined ? [] : rules.filter((r) => r !== rule);
  if (left.length === rules.length) return open;
  const next = { ...open };
  if (left.length === 0) delete next[machineId];
  else next[machineId] = left;
  return next;
}

export const isSuspected = (open: OpenSuspicions | undefined, machineId: string): boolean => (open?.[machineId]?.length ?? 0) > 0;
