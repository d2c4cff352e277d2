import { draft } from '@robustrl/contracts';
import { pullFailed } from '../../src/pull-failures';
import {
  holdsBucket,
  holdsWhole,
  InFlightPull,
  isLiveRollout,
  isMachineDown,
  isTrainerSource,
  liveRollouts,
  liveVersions,
  PullFailureReason,
  pullerRestarted,
  shardOf,
  trainerCanServe,
  WeightRegistryDraft,
  WeightRegistryState,
} from './weight-registry.state';

/**
 * Trainer failure during pulling (paper §5.2.2): "the process is interrupted, and the partially updated
 * weights are cleared. Finally, rollouts wait for the trainer to recover before re-initiating the weight
 * pull." The rule, made precise:
 *
 *   a live version is ABANDONED when its trainer can no longer serve it (trainer group failed, or every
 *   source rank gone) and no living rollout holds it whole.
 *
 * Abandoning fails every in-flight pull of it with `source-version-abandoned` and retires it
 * (WeightVersionRetired: "no live rollout needs this version" — nobody can complete it), which tells
 * every agent to drop its partial copy. Partial copies are not pooled into a whole: they may come from
 * different sources at different moments and the paper clears them. Nothing of that version is assigned
 * again until a WeightVersionPublished (the recovered trainer) starts it afresh.
 *
 * A version some living rollout already holds whole survives the trainer: it is as complete and
 * checksummed as the trainer's copy, so its remaining pullers continue from the relays and from
 * partial holders of the buckets they need (paper §5.2.2, "pulls the remaining one from other living
 * relay servers").
 */
export function abandonments(state: WeightRegistryState): WeightRegistryDraft[] {
  const out: WeightRegistryDraft[] = [];
  const rollouts = liveRollouts(state);
  for (const version of liveVersions(state)) {
    const v = state.versions[version];
    if (trainerCanServe(state, v) || rollouts.some((r) => holdsWhole(state, r, version))) continue;
    for (const pull of pullsOf(state, (p) => p.version === version)) out.push(pullFailed(pull, PullFailureReason.versionAbandoned));
    out.push(draft('WeightVersionRetired', { version }));
  }
  return out;
}

/**
 * Relay server failure during pulling (paper §5.2.2): a pull whose source died, was lent, or lost the
 * bucket fails with `source-lost`; the puller keeps what it completed and the scheduler gives it the
 * same bucket from another living holder. A pull whose puller stopped serving fails with `puller-gone`,
 * which frees its source for someone else; one whose puller's agent restarted since, with `puller-restarted`.
 */
export function stalePulls(state: WeightRegistryState): WeightRegistryDraft[] {
  const out: WeightRegistryDraft[] = [];
  for (const pull of pullsOf(state, () => true)) {
    if (!isLiveRollout(state, pull.pullerId)) out.push(pullFailed(pull, PullFailureReason.pullerGone));
    else if (pullerRestarted(state.machines, pull)) out.push(pullFailed(pull, PullFailureReason.pullerRestarted));
    else if (!sourceStillServes(state, pull)) out.push(pullFailed(pull, PullFailureReason.sourceLost));
  }
  return out;
}

/** A pull already under way may finish even after the trainer's release; only death or loss stops it. */
function sourceStillServes(state: WeightRegistryState, pull: InFlightPull): boolean {
  const v = state.versions[pull.version];
  if (!v || v.status !== 'live') return false;
  const shard = v.shards[shardOf(pull)];
  if (!shard) return false;
  if (isTrainerSource(v, pull.sourceId, shard.index)) return shard.trainerServing && !isMachineDown(state, pull.sourceId);
  return isLiveRollout(state, pull.sourceId) && holdsBucket(state, pull.sourceId, pull.version, pull.bucketIndex, shard.index);
}

const pullsOf = (state: WeightRegistryState, keep: (p: InFlightPull) => boolean) =>
  Object.values(state.pulls)
    .filter(keep)
    .sort((a, b) => a.pullId.localeCompare(b.pullId));
