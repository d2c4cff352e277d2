import type { MessageOf, RobustrlMessage } from '@robustrl/contracts';
import { Check, fail, LedgerRecord } from './system-invariants';

/**
 * The campaign's invariants for faults as clusters have them (cluster-faults.ts, partition-faults.ts):
 * no machine restarted past its budget (no recovery loop), every escalation named with its rule and
 * evidence, never two trainers for one rank, and every partition ended once. Pure, each tested on a made-up run that breaks it (cluster-invariants.spec.ts).
 */

export interface RestartBudgets {
  /** Restarts of a trainer machine for its own faults within the window (the controller's). */
  machineRestartBudget: number;
  machineRestartWindowMs: number;
  /** In-place engine restarts of a rollout machine within the window. */
  engineRestartBudget: number;
  engineRestartWindowMs: number;
}

type Decided = MessageOf<'RecoveryDecided'>;

/** The most of `times` (ms, ascending) inside any window of `windowMs`. */
function mostWithin(times: number[], windowMs: number): number {
  let most = 0;
  for (let i = 0, j = 0; j < times.length; j++) {
    while (times[j] - times[i] >= windowMs) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

/**
 * No recovery loop: no trainer machine restarted for its own faults (in place, or by a task restart its
 * fault escalated to; not a role its agent stopped for a lost lease) more often within the window than its budget, and no rollout engine restarted in
 * place more often than its own. A machine past its budget must have been retired instead.
 */
export function noRecoveryLoop(events: readonly RobustrlMessage[], budgets: RestartBudgets): Check {
  const what = 'no recovery loop (every machine restarted within its budget)';
  const handledAs = new Map<string, string>();
  for (const m of events) if (m.type === 'FaultConfirmed') handledAs.set(m.data.verdictId, (m as MessageOf<'FaultConfirmed'>).data.handledAs);
  const trainer = new Map<string, number[]>();
  const engine = new Map<string, number[]>();
  const seen = new Set<string>();
  for (const m of events) {
    if (m.type === 'RecoveryDecided') {
      const d = (m as Decided).data;
      if (seen.has(d.recoveryId) || (d.action !== 'restart-trainer-group' && d.action !== 'restart-task')) continue;
      seen.add(d.recoveryId);
      if (handledAs.get(d.verdictId) !== 'trainer') continue;
      // A trainer its agent stopped on losing the broker for its lease was cut off, not failing: the
      // partition invariant holds it to one recovery; its budget counts the machine's own faults only.
      if ((d.evidence as { signal?: string } | undefined)?.signal === 'lease-expired') continue;
      trainer.set(d.machineId, [...(trainer.get(d.machineId) ?? []), Date.parse(m.occurredAt)]);
    }
    if (m.type === 'RestartRolloutEngine') {
      const id = (m as MessageOf<'RestartRolloutEngine'>).data.machineId;
      engine.set(id, [...(engine.get(id) ?? []), Date.parse(m.occurredAt)]);
    }
  }
  const problems: string[] = [];
  const over = (kind: string, times: Map<string, number[]>, budget: number, windowMs: number) => {
    if (budget <= 0 && kind === 'trainer') return; // a budget of 0 never retires: nothing to hold it to
    for (const [machineId, ts] of times) {
      const most = mostWithin(
        ts.sort((a, b) => a - b),
        windowMs,
      );
      if (most > budget) problems.push(`${machineId}: ${most} ${kind} restarts within ${windowMs / 60_000} min (budget ${budget})`);
    }
  };
  over('trainer', trainer, budgets.machineRestartBudget, budgets.machineRestartWindowMs);
  over('engine', engine, budgets.engineRestartBudget, budgets.engineRestartWindowMs);
  const most = (times: Map<string, number[]>) => Math.max(0, ...[...times.values()].map((ts) => ts.length));
  return fail(
    what,
    problems,
    `${trainer.size} trainer machine(s) restarted (at most ${most(trainer)} each), ${engine.size} engine(s) restarted in place (at most ${most(engine)} each); budgets ${budgets.machineRestartBudget} and ${budgets.engineRestartBudget}`,
  );
}

const ESCALATION = /^escalate-|^task-restart-policy$/;

/**
 * Every escalation names its rule and its evidence: each task restart decided under an escalation rule
 * of the paper (or the task-restart policy) with the evidence it was decided on, and each RestartTask
 * command carries the rule of its decision.
 */
export function everyEscalationNamed(events: readonly RobustrlMessage[]): Check {
  const what = 'every escalation names its rule and the evidence';
  const problems: string[] = [];
  const rules = new Map<string, string>();
  const byRule = new Map<string, number>();
  for (const m of events) {
    if (m.type !== 'RecoveryDecided') continue;
    const d = (m as Decided).data;
    if (d.action !== 'restart-task') continue;
    rules.set(d.recoveryId, d.rule);
    if (!ESCALATION.test(d.rule)) problems.push(`${d.recoveryId} restarts the task under ${d.rule}, not an escalation rule`);
    if (Object.keys(d.evidence ?? {}).length === 0) problems.push(`${d.recoveryId} (${d.rule}) names no evidence`);
    byRule.set(d.rule, (byRule.get(d.rule) ?? 0) + 1);
  }
  for (const m of events) {
    if (m.type !== 'RestartTask') continue;
    const c = (m as MessageOf<'RestartTask'>).data;
    const decided = rules.get(c.recoveryId);
    if (decided === undefined) problems.push(`RestartTask ${c.commandId} without a task-restart decision`);
    else if (decided !== c.rule) problems.push(`RestartTask ${c.commandId} says ${c.rule}, its decision ${decided}`);
  }
  const tally = [...byRule.entries()].map(([rule, n]) => `${rule} ${n}`).join(', ');
  return fail(what, problems, rules.size === 0 ? 'no escalation' : `${rules.size} escalation(s): ${tally}`);
}

/**
 * Never two live trainers for one rank (no split brain): per rank, the trainer processes that trained
 * it take turns — a process that trained a rank never trains it again once another process has (a
 * partitioned trainer that kept training beside its replacement would). From the job's ledger.
 */
export function noSplitBrain(ledger: readonly LedgerRecord[]): Check {
  const what = 'never two live trainers for one rank (no split brain)';
  const byRank = new Map<number, LedgerRecord[]>();
  for (const r of ledger) if (r.kind === 'trained' && r.rank !== undefined) byRank.set(r.rank, [...(byRank.get(r.rank) ?? []), r]);
  const problems: string[] = [];
  let processes = 0;
  for (const [rank, records] of byRank) {
    const turns: number[] = [];
    for (const r of [...records].sort((a, b) => a.at - b.at)) if (turns.at(-1) !== r.pid) turns.push(r.pid);
    processes += new Set(turns).size;
    const seen = new Set<number>();
    for (const pid of turns) {
      if (seen.has(pid)) {
        problems.push(`rank ${rank}: process ${pid} trained again after another process had taken the rank`);
        break;
      }
      seen.add(pid);
    }
  }
  return fail(what, problems, `${byRank.size} rank(s) trained by ${processes} process(es) in turn, none beside another`);
}

/** A partition the campaign made: which machine, and when it was cut and healed (ms). */
export interface PartitionSpan {
  machineId: string;
  kind: string;
  from: number;
  to: number;
}

/**
 * Every partition either healed with no recovery or ended in one recovery, never both: at most one
 * recovery decided on the cut machine from the cut until a grace after the heal (a second one would be
 * the healed machine, already replaced, coming back as a fault; or a recovery repeated while it was cut).
 */
export function partitionsEndOnce(events: readonly RobustrlMessage[], partitions: readonly PartitionSpan[], graceMs: number): Check {
  const what = 'every partition healed with no recovery or ended in one recovery, never both';
  const problems: string[] = [];
  let healed = 0;
  let recovered = 0;
  for (const p of partitions) {
    const recoveries = new Set<string>();
    for (const m of events) {
      if (m.type !== 'RecoveryDecided') continue;
      const d = (m as Decided).data;
      const t = Date.parse(m.occurredAt);
      if (d.machineId === p.machineId && d.action !== 'report-only' && t >= p.from && t <= p.to + graceMs) recoveries.add(d.recoveryId);
    }
    if (recoveries.size === 0) healed++;
    else if (recoveries.size === 1) recovered++;
    else problems.push(`${p.kind} of ${p.machineId} (${Math.round((p.to - p.from) / 1000)} s): ${recoveries.size} recoveries (${[...recoveries].join(', ')})`);
  }
  return fail(
    what,
    problems,
    partitions.length === 0 ? 'no partition' : `${partitions.length} partition(s): ${healed} healed with no recovery, ${recovered} ended in one recovery`,
  );
}
