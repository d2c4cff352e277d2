import type { ContinuationDecision, ContinuationPolicy, TurnKind } from '@robustrl/contracts';

/**
 * Staleness of a trajectory and what happens to one continued after a weight update. Pure.
 *
 * Staleness is judged by the trajectory's OLDEST generated turn: staleness = current weight version −
 * the lowest weight version any model-output or tool-call turn was sampled with. Why the oldest:
 * every generated token is a sample of the policy that produced it, and the trainer's off-policy
 * correction (importance ratio, clipping) has to hold for all of them. Judging by the newest turn would
 * accept a trajectory whose first nine turns came from a policy far behind, as long as its last turn
 * was fresh — exactly the trajectory a staleness bound exists to reject. This is also how async RL
 * systems bound staleness (the version generation started with). Tool results are not policy samples
 * (the environment wrote them), so their version does not count.
 *
 * Consequences:
 * - `keep` (continue a trajectory after a weight update, new turns tagged with the new version) does not
 *   launder staleness: the kept prefix still has its old version, and the trajectory is as stale as it.
 * - `restart-from-prompt` drops the generated turns, so the restarted trajectory is as fresh as the
 *   weights it is restarted with.
 * - A trajectory with no generated turn has staleness 0. A version ahead of the trainer's (possible
 *   right after a trainer restart from the previous checkpoint) counts as 0, not negative: it is not stale.
 */

export interface VersionedTurn {
  kind: TurnKind;
  weightVersion: number;
}

/** How many weight versions behind the trainer a trajectory may be and still be trained on. */
export interface AcceptanceBound {
  maxStaleness: number;
}

export function isGenerated(kind: TurnKind): boolean {
  return kind !== 'tool-result';
}

/** The weight version a trajectory's staleness is judged by: its oldest generated turn's, or null when none. */
export function policyVersionOf(turns: readonly VersionedTurn[]): number | null {
  let oldest: number | null = null;
  for (const t of turns) {
    if (isGenerated(t.kind) && (oldest === null || t.weightVersion < oldest)) oldest = t.weightVersion;
  }
  return oldest;
}

export function staleness(oldestGeneratedVersion: number | null, currentWeightVersion: number): number {
  if (oldestGeneratedVersion === null) return 0;
  return Math.max(0, currentWeightVersion - oldestGeneratedVersion);
}

export function isAcceptable(oldestGeneratedVersion: number | null, currentWeightVersion: number, bound: AcceptanceBound): boolean {
  return staleness(oldestGeneratedVersion, currentWeightVersion) <= bound.maxStaleness;
}

/**
 * The lowest oldest-generated version still acceptable at `currentWeightVersion`: what a store filters
 * on (`min_weight_version >= this`), equivalent to `isAcceptable` for every version.
 */
export function oldestAcceptableVersion(currentWeightVersion: number, bound: AcceptanceBound): number {
  return currentWeightVersion - bound.maxStaleness;
}

/**
 * What to do with a trajectory that continues (on the same or another rollout) with weights
 * `newWeightVersion`, given the oldest generated version of what it has so far.
 *
 * - Nothing generated yet, or everything generated with the new version already: continue, there is
 *   nothing stale to keep or drop, whatever the policy.
 * - `restart-from-prompt`: drop the generated turns, keep the prompt.
 * - `keep`: continue — unless a bound is given and the kept prefix alone already exceeds it at the new
 *   version: then finishing the trajectory is wasted work (the trainer would reject it), so restart.
 */
export function decideContinuation(
  oldestGeneratedVersion: number | null,
  newWeightVersion: number,
  policy: ContinuationPolicy,
  bound?: AcceptanceBound,
): ContinuationDecision {
  if (oldestGeneratedVersion === null || oldestGeneratedVersion >= newWeightVersion) return { action: 'continue', reason: 'prefix-current' };
  if (policy === 'restart-from-prompt') return { action: 'restart-from-prompt', reason: 'policy-restart' };
  if (bound && !isAcceptable(oldestGeneratedVersion, newWeightVersion, bound)) return { action: 'restart-from-prompt', reason: 'prefix-beyond-bound' };
  return { action: 'continue', reason: 'policy-keep' };
}
