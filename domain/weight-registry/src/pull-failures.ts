import { draft } from '@robustrl/contracts';
import { InFlightPull, PullFailureReason, pullerRestarted, trainerCanServe, WeightRegistryDraft, WeightRegistryState } from './weight-registry.state';

/**
 * Trainer failure during pulling (paper §5.2.2): "the process is interrupted, and the partially updated
 * weights are cleared. Finally, rollouts wait for the trainer to recover before re-initiating the weight
 * pull." The rule, made precise:
 *
 *   a live version is ABANDONED when its trainer can no longer serve it (trainer group failed, or every
 *   source rank of one of its published shards gone) and no living rollout holds it whole.
 *
 * Abandoning fails every in-flight pull of it with `source-version-abandoned` and retires it
 * (WeightVersionRetired: "no live rollout needs this version" — nobody can complete it), which tells
 * every agent to drop its partial copy. Partial copies are not pooled into a whole: they may come from
 * different sources at different moments and the paper clears them — a rollout holding some shards whole
 * but not all holds a partial copy too. Nothing of that version is assigned
 * again until a WeightVersionPublished (the recovered trainer) starts it afresh.
 *
 * A version some living rollout already holds whole survives the trainer: it is as complete and
 * checksummed as the trainer's copy, so its remaining pullers continue from the relays and from
 * partial holders of the buckets they need (paper §5.2.2, "pulls the remaining one from other living
 * relay servers").
 */
export function abandonments(state: WeightRegistryState): WeightRegistryDraft[] {
  const out: WeightRegistryDraft[] = [];
  const ix = state.index;
  for (const version of [...ix.live]) {
    const v = state.versions[version];
    if (trainerCanServe(state, v) || ix.wholeCount.has(version)) continue;
    for (const pull of sortedPulls(state, ix.pullsOfVersion.get(version))) out.push(pullFailed(pull, PullFailureReason.versionAbandoned));
    out.push(draft('WeightVersionRetired', { version }));
  }
  return out;
}

/**
 * Relay server failure during pulling (paper §5.2.2): a pull whose source died, was lent, or lost the
 * bucket fails with `source-lost`; the puller keeps what it completed and the scheduler gives it the
 * same bucket from another living holder. A pull whose puller stopped serving fails with `puller-gone`,
 * which frees its source for someone else; one whose puller's agent restarted since it was assigned (the
 * new process never heard of it) with `puller-restarted`. (The index keeps the pulls that must fail.)
 */
export function stalePulls(state: WeightRegistryState): WeightRegistryDraft[] {
  return sortedPulls(state, state.index.stalePulls).map((pull) =>
    pullFailed(
      pull,
      !state.index.rolloutSet.has(pull.pullerId)
        ? PullFailureReason.pullerGone
        : pullerRestarted(state.machines, pull)
          ? PullFailureReason.pullerRestarted
          : PullFailureReason.sourceLost,
    ),
  );
}

const sortedPulls = (state: WeightRegistryState, ids: Iterable<string> | undefined): InFlightPull[] =>
  [...(ids ?? [])].map((id) => state.pulls[id]).sort((a, b) => a.pullId.localeCompare(b.pullId));

/** The WeightPullFailed that ends pull `p` for `reason` (the full-recompute reference the specs hold the registry to fails pulls with it too). */
export const pullFailed = (p: InFlightPull, reason: string) =>
  draft('WeightPullFailed', {
    pullId: p.pullId,
    version: p.version,
    ...(p.shard !== undefined ? { shard: p.shard } : {}),
    bucketIndex: p.bucketIndex,
    pullerId: p.pullerId,
    sourceId: p.sourceId,
    reason,
  });
