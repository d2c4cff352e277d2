import type { MessageOf, RobustrlMessage, TrainingSample } from '@robustrl/contracts';
import type { ObservedEttr } from './observed-ettr';
import { Check, fail } from './system-invariants';

/**
 * The invariants of a campaign on the real GRPO job (examples/grpo), on what the run left: the job's
 * own ledger (written by the trainer ranks and the agent loops, not by robustrl), the request manager's
 * batches with their training samples, and the events on the bus. Pure; each is tested on a made-up
 * run that breaks it (grpo-invariants.spec.ts). The log-prob recomputation that checks version tags
 * runs the job's own code (grpo-job.ts) and is judged by `versionTagsHold`.
 */
export interface GrpoRecord {
  kind: string;
  at: number;
  pid?: number;
  step?: number;
  rank?: number;
  sampleIds?: string[];
  /** Completed samples of the step the trainer's fetch left out as beyond the staleness bound. */
  staleIds?: string[];
  /** Completed samples left out because the request manager had no training sample for them (kept_batches.py). */
  unusableIds?: string[];
  batch?: string;
  digest?: { params: string; optimizer: string };
  recovered?: boolean;
  version?: number;
  passRate?: number;
  trajectoryId?: string;
  versions?: number[];
}

export interface GrpoShape {
  steps: number;
  /** Samples per step: prompts × group size. */
  batchSize: number;
  maxStaleness: number;
  ranks: number;
}

/** A step's batch in the request manager: every trajectory's id and (prompt, sample), and the training samples of the completed ones. */
export interface GrpoBatch {
  step: number;
  total: number;
  completed: Array<{ trajectoryId: string; promptId: string; sampleIndex: number; sample: TrainingSample | null }>;
}

/**
 * Every step committed exactly once and in order, each trained on exactly the trajectories recorded
 * for it: rank 0's checkpoint lines are 1..steps ascending; before each, every rank trained that step
 * on the same batch (digest), and rank 0's samples are the batch's completed trajectories in the
 * request manager — all of them but those its fetch left out as beyond the staleness bound (counted),
 * no other. A step trained again after a fault before its commit is a retry, counted.
 */
export function stepsTrainedOnRecordedTrajectories(shape: GrpoShape, ledger: GrpoRecord[], batches: GrpoBatch[]): Check {
  const what = 'every step committed once, in order, trained on exactly the trajectories recorded for it';
  const problems: string[] = [];
  const commits = ledger.filter((r) => r.kind === 'checkpoint').map((r) => r.step ?? -1);
  commits.forEach((step, i) => {
    if (commits.indexOf(step) !== i) problems.push(`step ${step} committed twice`);
    if (i > 0 && step <= commits[i - 1]) problems.push(`step ${step} committed after step ${commits[i - 1]}`);
  });
  for (let s = 1; s <= shape.steps; s++) if (!commits.includes(s)) problems.push(`step ${s} never committed`);
  let retries = 0;
  let excluded = 0;
  let unusable = 0;
  ledger.forEach((r, i) => {
    if (r.kind !== 'checkpoint' || r.recovered) return;
    const before = ledger.slice(0, i);
    const lastTrained = (rank: number) => [...before].reverse().find((t) => t.kind === 'trained' && t.step === r.step && t.rank === rank);
    const mine = Array.from({ length: shape.ranks }, (_, rank) => lastTrained(rank));
    if (mine.some((t) => !t)) return void problems.push(`step ${r.step} committed without every rank training it`);
    if (new Set(mine.map((t) => t!.batch)).size > 1) problems.push(`step ${r.step}: ranks trained on different batches`);
    const stale = [...(mine[0]!.staleIds ?? []), ...(mine[0]!.unusableIds ?? [])];
    excluded += (mine[0]!.staleIds ?? []).length;
    unusable += (mine[0]!.unusableIds ?? []).length;
    const ids = [...(mine[0]!.sampleIds ?? []), ...stale].sort();
    const batch = batches.find((b) => b.step === r.step);
    if (!batch) return void problems.push(`batch step-${r.step} not read from the request manager`);
    const recorded = batch.completed.map((t) => t.trajectoryId).sort();
    if (ids.length !== shape.batchSize)
      problems.push(`step ${r.step} trained on ${ids.length - stale.length} samples and left out ${stale.length}, the job's batch is ${shape.batchSize}`);
    if (ids.join() !== recorded.join()) {
      const extra = ids.filter((id) => !recorded.includes(id));
      const missing = recorded.filter((id) => !ids.includes(id));
      problems.push(`step ${r.step}: trained ${extra.length} trajectory(ies) not recorded for it, left out ${missing.length} recorded`);
    }
  });
  retries = ledger.filter((r) => r.kind === 'trained').length - commits.length * shape.ranks;
  return fail(
    what,
    problems,
    `${commits.length} steps committed in order on the ${shape.batchSize} recorded samples each (${excluded} left out as beyond the staleness bound when trained${unusable ? `, ${unusable} as without a training sample` : ''}); ${Math.max(0, retries)} rank-step(s) trained again after a fault`,
  );
}

/** Per step, one completed trajectory per (prompt, sample) in the store, and the agent loops completed each once. */
export function samplesNeitherLostNorDuplicated(shape: GrpoShape, ledger: GrpoRecord[], batches: GrpoBatch[]): Check {
  const what = 'no sample lost or duplicated';
  const problems: string[] = [];
  for (let s = 1; s <= shape.steps; s++) {
    const batch = batches.find((b) => b.step === s);
    if (!batch) {
      problems.push(`batch step-${s} not read`);
      continue;
    }
    const keys = batch.completed.map((t) => `${t.promptId}#${t.sampleIndex}`);
    const dup = keys.filter((k, i) => keys.indexOf(k) !== i);
    if (dup.length) problems.push(`step-${s}: ${dup.slice(0, 3).join(', ')} completed more than once`);
    if (new Set(keys).size !== shape.batchSize) problems.push(`step-${s}: ${new Set(keys).size} of ${shape.batchSize} samples completed`);
    const noSample = batch.completed.filter((t) => t.sample === null).length;
    if (noSample) problems.push(`step-${s}: ${noSample} completed trajectory(ies) without a training sample`);
  }
  const completions = new Map<string, number>();
  for (const r of ledger) if (r.kind === 'completed' && r.trajectoryId) completions.set(r.trajectoryId, (completions.get(r.trajectoryId) ?? 0) + 1);
  for (const [id, n] of completions) if (n > 1) problems.push(`${id} completed ${n} times by the agent loops`);
  return fail(what, problems, `${batches.reduce((n, b) => n + b.completed.length, 0)} samples, each (prompt, sample) completed once`);
}

/** After every restart each rank's parameters and optimizer state equal the checkpoint's, by digest. */
export function restartsResumeTheCheckpoint(ledger: GrpoRecord[]): Check {
  const what = "after a restart every rank's parameters and optimizer state equal the checkpoint's (digests)";
  const problems: string[] = [];
  const saved = new Map<number, GrpoRecord['digest']>();
  let resumes = 0;
  for (const r of ledger) {
    if (r.kind === 'checkpoint' && r.digest && r.step !== undefined) saved.set(r.step, r.digest);
    if (r.kind !== 'resumed' || r.step === undefined) continue;
    resumes++;
    const expected = saved.get(r.step);
    if (!expected) problems.push(`rank ${r.rank} resumed step ${r.step}, whose checkpoint digest the ledger does not hold`);
    else if (expected.params !== r.digest?.params || expected.optimizer !== r.digest?.optimizer)
      problems.push(
        `rank ${r.rank} resumed step ${r.step} with ${r.digest?.params === expected.params ? 'the optimizer state' : 'parameters'} other than saved`,
      );
  }
  return fail(what, problems, `${resumes} rank resume(s), each equal to its checkpoint`);
}

/**
 * No sample was trained beyond the staleness bound: every generated token of the samples each step
 * trained on (rank 0's last training of it, from the ledger) was produced by version
 * s-1-maxStaleness or newer (the versions the engines reported).
 */
export function samplesWithinStaleness(shape: GrpoShape, batches: GrpoBatch[], ledger: GrpoRecord[]): Check {
  const what = `every trained token was generated within the staleness bound (${shape.maxStaleness})`;
  const problems: string[] = [];
  let worst = 0;
  let untagged = 0;
  const trainedIds = new Map<number, Set<string>>();
  for (const r of ledger) if (r.kind === 'trained' && r.rank === 0 && r.step !== undefined) trainedIds.set(r.step, new Set(r.sampleIds ?? []));
  for (const b of batches)
    for (const t of b.completed) {
      if (!trainedIds.get(b.step)?.has(t.trajectoryId)) continue;
      const versions = (t.sample?.versions ?? []).filter((_, i) => t.sample!.lossMask[i] === 1);
      for (const v of versions) {
        if (v === null) {
          untagged++;
          continue;
        }
        const behind = b.step - 1 - v;
        worst = Math.max(worst, behind);
        if (behind > shape.maxStaleness) problems.push(`${t.trajectoryId} (step ${b.step}): a token of version ${v}, ${behind} behind`);
      }
    }
  if (untagged) problems.push(`${untagged} generated token(s) carry no version`);
  return fail(what, problems, `the worst token ${worst} version(s) behind its step`);
}

/** What `python -m robustrl_grpo verify-versions` reports (examples/grpo/src/robustrl_grpo/verify.py). */
export interface VersionReport {
  tolerance: number;
  samples: number;
  tokens: number;
  max_diff: number;
  mean_diff: number;
  mismatched: string[];
  missing_versions: number[];
  neighbour_tokens: number;
  discriminating: number;
}

/**
 * Every answer was produced by the version it is tagged with: the recomputed log-probs of a sample of
 * turns, under their tagged versions, agree within the tolerance; and the check can tell versions
 * apart — at least a tenth of the tokens (and 10 or more) are ones on which the neighbouring version
 * differs by more than twice the tolerance, so a wrong tag would have failed there.
 */
export function versionTagsHold(report: VersionReport | { error: string }): Check {
  const what = 'every answer was produced by the version it is tagged with (log-probs recomputed on the trainer side)';
  if ('error' in report) return { what, ok: false, detail: report.error };
  const problems: string[] = [];
  if (report.tokens === 0) problems.push('no token was checked');
  if (report.mismatched.length) problems.push(`${report.mismatched.length} token(s) beyond ${report.tolerance}: ${report.mismatched.slice(0, 3).join('; ')}`);
  if (report.missing_versions.length) problems.push(`versions ${report.missing_versions.join(', ')} could not be recomputed (checkpoint gone)`);
  if (report.discriminating < Math.max(10, report.tokens / 10))
    problems.push(`only ${report.discriminating} of ${report.tokens} tokens tell a version from its neighbour: too few to trust the check`);
  return fail(
    what,
    problems,
    `${report.tokens} tokens of ${report.samples} samples: max |Δ log-prob| ${report.max_diff.toExponential(1)}, mean ${report.mean_diff.toExponential(1)} (tolerance ${report.tolerance}); ${report.discriminating} token(s) on which a wrong tag would have failed`,
  );
}

/**
 * GPU activity comes from what the processes do: every sample of the job is `process-cpu` (never a
 * pushed constant), and the trainers' readings vary — busy while training, near zero while waiting.
 */
export function activityMeasuredNotPushed(events: RobustrlMessage[], trainerIds: readonly string[]): Check {
  const what = 'GPU activity measured from the processes, not a constant';
  const samples = events.filter((m): m is MessageOf<'GpuActivitySampled'> => m.type === 'GpuActivitySampled');
  const problems: string[] = [];
  const sources = new Set(samples.map((m) => m.data.source));
  if (samples.length === 0) problems.push('no GpuActivitySampled event');
  if ([...sources].some((s) => s !== 'process-cpu')) problems.push(`sources ${[...sources].join(', ')}: expected process-cpu only`);
  const trainer = samples.filter((m) => trainerIds.includes(m.data.machineId)).map((m) => m.data.tensorActive);
  const high = trainer.length ? Math.max(...trainer) : 0;
  const low = trainer.length ? Math.min(...trainer) : 0;
  if (high < 0.2) problems.push(`the trainers never read busy (max ${high.toFixed(2)})`);
  if (low > 0.05) problems.push(`the trainers never read idle (min ${low.toFixed(2)})`);
  return fail(what, problems, `${samples.length} samples; trainers between ${low.toFixed(2)} and ${high.toFixed(2)}`);
}

/** The job learned under faults: the last evaluation's pass rate within `tolerance` of the fault-free run's, or above the first when there is none. */
export function passRateHolds(ledger: GrpoRecord[], baseline: number | null, tolerance: number): Check {
  const evals = ledger.filter((r) => r.kind === 'eval' && typeof r.passRate === 'number').sort((a, b) => (a.step ?? 0) - (b.step ?? 0));
  const first = evals[0]?.passRate ?? null;
  const last = evals[evals.length - 1]?.passRate ?? null;
  if (last === null || first === null) return { what: 'the job learned', ok: false, detail: 'no evaluation in the ledger' };
  if (baseline === null)
    return {
      what: 'the job learned (no fault-free run to compare with)',
      ok: last > first,
      detail: `greedy pass rate ${first.toFixed(2)} → ${last.toFixed(2)}`,
    };
  return {
    what: `the last pass rate within ${tolerance} of the fault-free run's`,
    ok: Math.abs(last - baseline) <= tolerance,
    detail: `faulted ${last.toFixed(2)}, fault-free ${baseline.toFixed(2)} (from ${first.toFixed(2)})`,
  };
}

/**
 * The ETTR the control plane reports agrees with the ETTR observed from the job's processes
 * (observed-ettr.ts: engines' health, trainer ranks alive and loaded, samples completing) within
 * `tolerance` — the number robustrl sells, held to what the machines really did.
 */
export function ettrAgrees(reported: number | null, observed: ObservedEttr | null, tolerance: number): Check {
  const what = `the ETTR the control plane reports is within ${tolerance} of the ETTR observed from the processes`;
  if (reported === null) return { what, ok: false, detail: 'the control plane reported no ETTR' };
  if (observed === null) return { what, ok: false, detail: 'nothing was observed' };
  return {
    what,
    ok: Math.abs(reported - observed.ettr) <= tolerance,
    detail: `reported ${reported.toFixed(3)}, observed ${observed.ettr.toFixed(3)} (${observed.effectiveGpuSeconds} of ${observed.gpuSeconds} GPU-seconds effective)`,
  };
}
