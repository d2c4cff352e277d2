import { draft } from '@robustrl/contracts';
import { pendingKey, servingKey } from '../../src/registry-index';
import {
  attemptsOf,
  holdsBucket,
  holdsWhole,
  isMachineDown,
  liveRollouts,
  publishedShards,
  pullIdFor,
  shardOf,
  shardServed,
  targetVersion,
  WeightRegistryDraft,
  WeightRegistryState,
  WeightShard,
  WeightVersion,
} from './weight-registry.state';

/**
 * PullScheduler — greedy, recomputed from state on every change (paper §5.2.1 ➁ ➂):
 *
 *   target   = the newest live version; every living rollout not holding it whole is a puller.
 *   order    = each puller fetches the target's buckets in index order, at most `window` in flight
 *              (default 1: one bucket at a time). Strictly in order: if its next bucket has no free
 *              source it waits, it does not skip ahead.
 *   sources  = the version's trainer ranks (while the trainer serves it: not failed; once released only
 *              for a bucket no rollout holds) and
 *              every living rollout holding that bucket — whole or not, so a relay serves bucket k as
 *              soon as it has it (pipelining at bucket granularity).
 *   rule     = a source serving bucket (v, k) to one puller is not offered (v, k) to another: "at any
 *              given time, each weight is pulled by only one rollout" (paper §5.2.1 ➁).
 *   choice   = the least busy candidate (fewest pulls it serves now, any bucket), rollouts before trainer
 *              ranks on a tie (the trainer has other work: relays exist to take load off it, paper
 *              Figure 18), then by id. Sources a puller's agent reported unreachable for this version
 *              come last (paper §5.2.2: "find another relay server") until a pull from them completes.
 *   pullers  = visited in id order; deterministic, so the same state always yields the same pulls.
 *   relays   = off (baseline for comparison): only trainer ranks serve, released or not.
 *
 * Pulls of an older version still in flight when a newer one is published run to completion (they
 * count against the puller's window) but no new ones are started: pullers go for the newest weights.
 */
export function schedulePulls(state: WeightRegistryState, window: number, relays = true): WeightRegistryDraft[] {
  const version = targetVersion(state);
  if (version === undefined) return [];
  const v = state.versions[version];
  const out: WeightRegistryDraft[] = [];

  const busy = new Map<string, number>();
  const serving = new Set<string>();
  const inFlightFor = new Map<string, number>();
  const pending = new Set<string>();
  const take = (pullerId: string, sourceId: string, pullVersion: number, shard: number, bucketIndex: number) => {
    busy.set(sourceId, (busy.get(sourceId) ?? 0) + 1);
    serving.add(servingKey(sourceId, pullVersion, shard, bucketIndex));
    inFlightFor.set(pullerId, (inFlightFor.get(pullerId) ?? 0) + 1);
    pending.add(pendingKey(pullVersion, shard, bucketIndex, pullerId));
  };
  for (const p of Object.values(state.pulls)) take(p.pullerId, p.sourceId, p.version, shardOf(p), p.bucketIndex);

  const rollouts = liveRollouts(state);
  for (const pullerId of rollouts) {
    if (holdsWhole(state, pullerId, version)) continue;
    // Each published shard in turn, each in bucket order; a shard whose next bucket has no free source
    // waits, the next shard does not.
    for (const shard of publishedShards(v)) {
      for (const bucket of shard.buckets) {
        if ((inFlightFor.get(pullerId) ?? 0) >= window) break;
        if (holdsBucket(state, pullerId, version, bucket.index, shard.index) || pending.has(pendingKey(version, shard.index, bucket.index, pullerId))) continue;
        const candidates = sourcesOf(state, v, shard, bucket.index, relays ? rollouts : []).filter(
          (c) => c.id !== pullerId && !serving.has(servingKey(c.id, version, shard.index, bucket.index)),
        );
        if (candidates.length === 0) break;
        candidates.sort((a, b) => a.suspect - b.suspect || (busy.get(a.id) ?? 0) - (busy.get(b.id) ?? 0) || a.rank - b.rank || a.id.localeCompare(b.id));
        const { id: sourceId, address: sourceAddress } = candidates[0];
        const attempt = attemptsOf(state, version, shard.index, bucket.index, pullerId) + 1;
        out.push(
          draft('WeightPullAssigned', {
            pullId: pullIdFor(version, shard.index, bucket.index, pullerId, attempt),
            version,
            ...(shard.index !== 0 ? { shard: shard.index } : {}),
            bucketIndex: bucket.index,
            pullerId,
            sourceId,
            sourceAddress,
            ...(shard.digest ? { publication: shard.digest } : {}),
          }),
        );
        take(pullerId, sourceId, version, shard.index, bucket.index);
      }
    }
  }
  return out;
}

/**
 * Who may serve bucket `index` of `v` to a new puller; `rank` orders rollouts before trainer ranks,
 * `suspect` puts sources reported unreachable last (still used when nothing else holds the bucket, so a
 * transient failure of the only source does not stall the version; a dead one is confirmed by the
 * detector soon enough and then drops out).
 */
function sourcesOf(state: WeightRegistryState, v: WeightVersion, shard: WeightShard, index: number, rollouts: string[]) {
  const suspect = (id: string) => (v.unreachable.includes(id) ? 1 : 0);
  const out: Array<{ id: string; address: string; rank: number; suspect: number }> = [];
  for (const r of rollouts) {
    // liveRollouts only lists machines with a weight server.
    if (holdsBucket(state, r, v.version, index, shard.index))
      out.push({ id: r, address: state.machines[r].weightsAddress ?? '', rank: 0, suspect: suspect(r) });
  }
  // A released trainer (paper §5.2.1: async resumes training after the first relay) is asked only for a
  // bucket no living rollout holds, or none its pullers can reach (paper §5.2.2: "find another relay
  // server"; the trainer is the last one). A shard's ranks serve that shard only.
  if (shardServed(state, shard) && (!v.trainerReleased || out.every((c) => c.suspect === 1))) {
    for (const s of shard.sources) {
      if (!isMachineDown(state, s.instanceId)) out.push({ id: s.instanceId, address: s.address, rank: 1, suspect: suspect(s.instanceId) });
    }
  }
  return out;
}
