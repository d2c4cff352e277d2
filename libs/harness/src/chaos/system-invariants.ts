import type { BatchSample, MessageOf, RobustrlMessage, TrajectoryWithTurns } from '@robustrl/contracts';

/**
 * The invariants of the whole-system chaos campaign, checked after the run on what it left:
 * the reference job's ledger, the trajectory store's batches, the events on the bus and the agents'
 * own account of the restarts they carried out. Pure: every check is a function of those facts, so
 * each is tested on a made-up run that breaks it (system-invariants.spec.ts).
 */
export interface Check {
  what: string;
  ok: boolean;
  detail: string;
}

/** One line of the reference job's ledger (clients/python/robustrl_reference.py). */
export interface LedgerRecord {
  kind: string;
  at: number;
  pid: number;
  step?: number;
  rank?: number;
  attempt?: number;
  trajectories?: number;
  stale?: number;
  version?: number;
  trajectoryId?: string;
  turns?: number;
  restarts?: number;
}

export interface StoredBatch {
  step: number;
  /** Trajectories of the batch in the store, any status. */
  total: number;
  /** The completed ones, with the turns of their current attempt. */
  completed: TrajectoryWithTurns[];
  /** The same as training samples (tokens in, tokens out), when the request manager built them. */
  samples?: BatchSample[];
}

/** An agent saying it restarted its role process for a recovery (from its log). */
export interface RoleRestart {
  machineId: string;
  recoveryId: string;
  what: 'trainer' | 'engine';
}

export interface JobShape {
  steps: number;
  batchSize: number;
  toolRounds: number;
  maxStaleness: number;
}

export interface CampaignFacts {
  job: JobShape;
  ledger: LedgerRecord[];
  batches: StoredBatch[];
  /** The job's events, each once (by event id). */
  events: RobustrlMessage[];
  roleRestarts: RoleRestart[];
  /**
   * Each weight version's publication (WeightVersionPublished): version and when it became visible on
   * the bus (ms since the epoch) — what the router could know, the basis of its bound.
   */
  published: Array<{ version: number; at: number }>;
}

export function checkInvariants(facts: CampaignFacts): Check[] {
  return [
    stepsTrainedOnceInOrder(facts),
    trajectoriesNeitherLostNorDuplicated(facts),
    turnsStoredOnce(facts),
    noStaleServingBeyondBound(facts),
    noDuplicateRestartPerFault(facts),
    everyFaultEndedInRecoveryOrEscalation(facts),
  ];
}

export const fail = (what: string, problems: string[], okDetail: string): Check => ({
  what,
  ok: problems.length === 0,
  detail: problems.length === 0 ? okDetail : `${problems.length} problem(s): ${problems.slice(0, 6).join('; ')}${problems.length > 6 ? '; …' : ''}`,
});

/**
 * Every step trained exactly once and in order: rank 0's checkpoints — the commit of a step — are
 * 1..steps, each once, ascending; each committed step was trained (by rank 0, before its checkpoint) on
 * its whole batch, every trajectory of it either trained or excluded by the trainer's fetch as beyond
 * the staleness bound (counted: samples spent). Training a step again after a fault before its commit
 * is a retry (lost work, counted), not a violation.
 */
export function stepsTrainedOnceInOrder({ job, ledger }: CampaignFacts): Check {
  const what = 'every step trained exactly once and in order';
  const problems: string[] = [];
  const commits = ledger.filter((r) => r.kind === 'checkpoint').map((r) => r.step ?? -1);
  const seen = new Set<number>();
  let stale = 0;
  commits.forEach((step, i) => {
    if (seen.has(step)) problems.push(`step ${step} committed twice`);
    seen.add(step);
    if (i > 0 && step <= commits[i - 1]) problems.push(`step ${step} committed after step ${commits[i - 1]}`);
  });
  for (let s = 1; s <= job.steps; s++) if (!seen.has(s)) problems.push(`step ${s} never committed`);
  for (let i = 0; i < ledger.length; i++) {
    const r = ledger[i];
    if (r.kind !== 'checkpoint') continue;
    const trained = ledger
      .slice(0, i)
      .reverse()
      .find((t) => t.kind === 'trained' && t.step === r.step && t.rank === 0);
    if (!trained) problems.push(`step ${r.step} committed without being trained by rank 0`);
    else if ((trained.trajectories ?? 0) + (trained.stale ?? 0) !== job.batchSize)
      problems.push(`step ${r.step} trained on ${trained.trajectories} of ${job.batchSize} trajectories (${trained.stale ?? 0} excluded as stale)`);
    else stale += trained.stale ?? 0;
  }
  const retries = ledger.filter((r) => r.kind === 'trained').length - commits.length * ranksOf(ledger);
  return fail(
    what,
    problems,
    `${commits.length} steps committed in order; ${Math.max(0, retries)} rank-step(s) trained again after a fault; ${stale} trajectory(ies) excluded as beyond the staleness bound when trained`,
  );
}

function ranksOf(ledger: LedgerRecord[]): number {
  return Math.max(1, new Set(ledger.filter((r) => r.kind === 'trained').map((r) => r.rank)).size);
}

/** Per step, one trajectory per prompt in the store, each completed, and the agent loops completed each once. */
export function trajectoriesNeitherLostNorDuplicated({ job, batches, ledger }: CampaignFacts): Check {
  const what = 'no trajectory lost or duplicated';
  const problems: string[] = [];
  for (let s = 1; s <= job.steps; s++) {
    const batch = batches.find((b) => b.step === s);
    if (!batch) {
      problems.push(`batch step-${s} not read`);
      continue;
    }
    if (batch.total !== job.batchSize) problems.push(`step-${s} holds ${batch.total} trajectories for ${job.batchSize} prompts`);
    const prompts = batch.completed.map((t) => `${t.promptId}#${t.sampleIndex}`);
    const dup = prompts.filter((p, i) => prompts.indexOf(p) !== i);
    if (dup.length) problems.push(`step-${s}: ${dup.join(', ')} completed more than once`);
    for (let k = 0; k < job.batchSize; k++) if (!prompts.includes(`s${s}-p${k}#0`)) problems.push(`step-${s}: prompt s${s}-p${k} has no completed trajectory`);
  }
  const completions = new Map<string, number>();
  for (const r of ledger) if (r.kind === 'completed' && r.trajectoryId) completions.set(r.trajectoryId, (completions.get(r.trajectoryId) ?? 0) + 1);
  for (const [id, n] of completions) if (n > 1) problems.push(`${id} completed ${n} times by the agent loops`);
  const stored = batches.reduce((sum, b) => sum + b.completed.length, 0);
  return fail(what, problems, `${stored} trajectories, each prompt completed once`);
}

const MODEL_KINDS = new Set(['model-output', 'tool-call']);

/** Each completed trajectory's turns: ids unique, indices 0..n-1, one model turn per round of the job. */
export function turnsStoredOnce({ job, batches }: CampaignFacts): Check {
  const what = 'every turn stored once';
  const problems: string[] = [];
  let turns = 0;
  for (const b of batches)
    for (const t of b.completed) {
      const ids = t.turns.map((u) => u.turnId);
      if (new Set(ids).size !== ids.length) problems.push(`${t.trajectoryId}: a turn id stored twice`);
      t.turns.forEach((u, i) => {
        if (u.turnIndex !== i) problems.push(`${t.trajectoryId}: turn ${i} has index ${u.turnIndex}`);
      });
      const model = t.turns.filter((u) => MODEL_KINDS.has(u.kind)).length;
      if (model !== job.toolRounds + 1) problems.push(`${t.trajectoryId}: ${model} model turns, the job makes ${job.toolRounds + 1}`);
      turns += t.turns.length;
    }
  return fail(what, problems, `${turns} turns, each once, in order`);
}

/** The version an engine wrote into its answer (`v<version>: …`), or null. */
export function servedVersion(content: unknown): number | null {
  const text = typeof content === 'string' ? content : content && typeof content === 'object' ? (content as { content?: unknown }).content : null;
  const m = typeof text === 'string' ? /^v(\d+):/.exec(text) : null;
  return m ? Number(m[1]) : null;
}

/**
 * A publication landing while an answer was generated is not the engine serving stale weights: the
 * turn is judged against what was published this long before it was stored.
 */
export const GENERATION_ALLOWANCE_MS = 2_000;

/**
 * No engine served a version beyond the bound: when each model turn was generated, its engine's
 * version was at most `maxStaleness` behind the newest version visible on the bus by then; and the turn is
 * tagged with the version its engine really held (the version the engine wrote into its answer). What
 * grows stale later, while it waits to be trained, is the trainer's fetch to exclude (the step check).
 */
export function noStaleServingBeyondBound({ job, batches, published }: CampaignFacts): Check {
  const what = `no engine served a version beyond the staleness bound (${job.maxStaleness})`;
  const problems: string[] = [];
  const byTime = [...published].sort((a, b) => a.at - b.at);
  const newestAt = (t: number) => byTime.filter((p) => p.at <= t).reduce((max, p) => Math.max(max, p.version), 0);
  let worst = 0;
  let turns = 0;
  for (const b of batches)
    for (const t of b.completed)
      for (const u of t.turns) {
        if (!MODEL_KINDS.has(u.kind)) continue;
        turns++;
        const served = servedVersion(u.content);
        if (served === null) {
          problems.push(`${u.turnId}: the answer names no version`);
          continue;
        }
        if (u.weightVersion !== served) problems.push(`${u.turnId}: tagged version ${u.weightVersion}, the engine served ${served}`);
        const newest = newestAt(Date.parse(u.createdAt) - GENERATION_ALLOWANCE_MS);
        const behind = newest - served;
        worst = Math.max(worst, behind);
        if (behind > job.maxStaleness) problems.push(`${u.turnId}: served with version ${served} when ${newest} was published (${behind} behind)`);
      }
  return fail(what, problems, `${turns} model turns, the worst ${worst} version(s) behind when served; each tagged with the version that produced it`);
}

type Decided = MessageOf<'RecoveryDecided'>;

/** Commands that restart a role process, by recovery and machine: what the agents may restart at most. */
function restartCommands(events: RobustrlMessage[]): Map<string, Set<string>> {
  const issued = new Map<string, Set<string>>();
  const add = (recoveryId: string, machineId: string, commandId: string) => {
    const key = `${recoveryId} ${machineId}`;
    issued.set(key, (issued.get(key) ?? new Set()).add(commandId));
  };
  for (const m of events) {
    if (m.type === 'RestartTrainerGroup') for (const id of (m as MessageOf<'RestartTrainerGroup'>).data.machines) add(m.data.recoveryId, id, m.data.commandId);
    if (m.type === 'RestartRolloutEngine') add(m.data.recoveryId, (m as MessageOf<'RestartRolloutEngine'>).data.machineId, m.data.commandId);
  }
  return issued;
}

/**
 * No duplicate restart for one fault: one recovery per confirmed fault, and no machine restarted its
 * role process for a recovery more often than that recovery asked it to (a replayed or re-decided
 * command carried out twice would show here).
 */
export function noDuplicateRestartPerFault({ events, roleRestarts }: Pick<CampaignFacts, 'events' | 'roleRestarts'>): Check {
  const what = 'no duplicate restart for one fault';
  const problems: string[] = [];
  const recoveriesOf = new Map<string, Set<string>>();
  for (const m of events)
    if (m.type === 'RecoveryDecided') {
      const d = (m as Decided).data;
      recoveriesOf.set(d.verdictId, (recoveriesOf.get(d.verdictId) ?? new Set()).add(d.recoveryId));
    }
  for (const [verdict, ids] of recoveriesOf) if (ids.size > 1) problems.push(`fault ${verdict} got ${ids.size} recoveries`);
  const issued = restartCommands(events);
  const done = new Map<string, number>();
  for (const r of roleRestarts) done.set(`${r.recoveryId} ${r.machineId}`, (done.get(`${r.recoveryId} ${r.machineId}`) ?? 0) + 1);
  for (const [key, n] of done) {
    const allowed = issued.get(key)?.size ?? 0;
    if (n > allowed) problems.push(`${key.replace(' ', ': ')} restarted ${n} time(s) for ${allowed} command(s)`);
  }
  return fail(what, problems, `${recoveriesOf.size} faults, ${roleRestarts.length} role restarts, none twice`);
}

/**
 * Every confirmed fault ended in a completed recovery or an escalation with its rule: its decision is
 * on the bus; a recovery completed `recovered`, or `escalated` with the task restart decided under a
 * named escalation rule; a fault covered by an active recovery is covered by one that completed so.
 */
export function everyFaultEndedInRecoveryOrEscalation({ events }: Pick<CampaignFacts, 'events'>): Check {
  const what = 'every confirmed fault ended in a completed recovery or an escalation with its rule';
  const problems: string[] = [];
  const decisions = events.filter((m): m is Decided => m.type === 'RecoveryDecided');
  const outcome = new Map<string, string>();
  for (const m of events) if (m.type === 'RecoveryCompleted') outcome.set(m.data.recoveryId, (m as MessageOf<'RecoveryCompleted'>).data.outcome);
  const ended = (recoveryId: string): string | null => {
    const o = outcome.get(recoveryId);
    if (o === 'recovered') return null;
    if (o === 'escalated') {
      const escalation = decisions.find((d) => d.data.recoveryId === recoveryId && d.data.action === 'restart-task');
      return escalation && /^escalate-|^task-restart-policy$/.test(escalation.data.rule) ? null : `${recoveryId} escalated without an escalation rule`;
    }
    return o ? `${recoveryId} ended ${o}` : `${recoveryId} never completed`;
  };
  const tally = { recovered: 0, escalated: 0, covered: 0, reportOnly: 0 };
  const verdicts = new Set<string>();
  for (const m of events) {
    if (m.type !== 'FaultConfirmed') continue;
    const v = (m as MessageOf<'FaultConfirmed'>).data;
    if (verdicts.has(v.verdictId)) continue;
    verdicts.add(v.verdictId);
    const first = decisions.find((d) => d.data.verdictId === v.verdictId);
    if (!first) {
      problems.push(`fault ${v.verdictId} (${v.machineId}, ${v.rule}) has no decision`);
      continue;
    }
    if (first.data.rule === 'covered-by-active-recovery') {
      const covering = /covered by (\S+)/.exec(first.data.evidence.detail ?? '')?.[1];
      const problem = covering ? ended(covering) : `fault ${v.verdictId} is covered by an unnamed recovery`;
      if (problem) problems.push(`fault ${v.verdictId}: ${problem}`);
      else tally.covered++;
      continue;
    }
    if (first.data.action === 'report-only') {
      tally.reportOnly++;
      continue;
    }
    const problem = ended(first.data.recoveryId);
    if (problem) problems.push(`fault ${v.verdictId} (${v.machineId}, ${v.rule}): ${problem}`);
    else if (outcome.get(first.data.recoveryId) === 'escalated') tally.escalated++;
    else tally.recovered++;
  }
  return fail(
    what,
    problems,
    `${verdicts.size} confirmed faults: ${tally.recovered} recovered, ${tally.escalated} escalated with their rule, ${tally.covered} covered by another recovery, ${tally.reportOnly} report-only`,
  );
}
