import { draft } from '@robustrl/contracts';
import { byId } from './collections';
import { holderKey, pendingKey, RegistryIndex, servingKey, shardKey } from './registry-index';
import {
  attemptsOf,
  holdsBucket,
  isMachineDown,
  publishedShards,
  pullIdFor,
  shardServed,
  WeightRegistryDraft,
  WeightRegistryState,
  WeightShard,
  WeightVersion,
} from './weight-registry.state';

export const DEFAULT_PULL_WINDOW = 1;

/**
 * PullScheduler — greedy, recomputed on every change (paper §5.2.1 ➁ ➂), from the index:
 *
 *   target   = the newest live version; every living rollout not holding it whole is a puller.
 *   order    = each puller walks the target's published shards in index order and each shard's buckets
 *              in index order, at most `window` in flight (default 1: one bucket at a time). Strictly in
 *              order within a shard: if its next bucket has no free source the puller goes on to the
 *              next shard, it does not skip ahead in this one. Shards are independent: a shard is pulled
 *              as soon as its publisher published it, whatever the others (DESIGN "Weights are named and
 *              sharded": one publisher per trainer rank).
 *   sources  = the shard's trainer ranks (while they serve it: not failed; once the version is released
 *              only for a bucket no rollout holds) and
 *              every living rollout holding that (shard, bucket) — whole or not, so a relay serves bucket
 *              k as soon as it has it (pipelining at bucket granularity).
 *   rule     = a source serving bucket (v, s, k) to one puller is not offered (v, s, k) to another: "at
 *              any given time, each weight is pulled by only one rollout" (paper §5.2.1 ➁).
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
  const ix = state.index;
  const version = ix.live.at(-1);
  if (version === undefined) return [];
  const v = state.versions[version];
  // Only live rollouts missing the target with room in their window can be given anything.
  const pullers: string[] = [];
  for (const [inFlight, ids] of ix.incompleteBy) if (inFlight < window) pullers.push(...ids);
  if (pullers.length === 0) return [];
  pullers.sort();

  const out: WeightRegistryDraft[] = [];
  const taken = new Takes(ix);
  const shards = publishedShards(v);
  for (const pullerId of pullers) {
    for (const shard of shards) {
      for (const bucket of shard.buckets) {
        if (taken.inFlightFor(pullerId) >= window) break;
        if (holdsBucket(state, pullerId, version, bucket.index, shard.index) || taken.pending(version, shard.index, bucket.index, pullerId)) continue;
        const source = chooseSource(state, v, shard, bucket.index, pullerId, relays, taken);
        if (!source) break;
        const attempt = attemptsOf(state, version, shard.index, bucket.index, pullerId) + 1;
        out.push(
          draft('WeightPullAssigned', {
            pullId: pullIdFor(version, shard.index, bucket.index, pullerId, attempt),
            version,
            // Absent for shard 0: a version of one shard is assigned as it always was.
            ...(shard.index !== 0 ? { shard: shard.index } : {}),
            bucketIndex: bucket.index,
            pullerId,
            sourceId: source.id,
            sourceAddress: source.address,
            ...(shard.digest ? { publication: shard.digest } : {}),
          }),
        );
        taken.take(pullerId, source.id, version, shard.index, bucket.index);
      }
    }
  }
  return out;
}

/**
 * What this decision has handed out so far, over what the index says is in flight (decide never writes
 * the state): load per source, (source, bucket) served, (bucket, puller) fetched, pulls per puller; and
 * how far each idle list is used up (taking only grows within a decision, so a cursor skips the taken).
 */
class Takes {
  private readonly busy = new Map<string, number>();
  private readonly serving = new Set<string>();
  private readonly fetching = new Set<string>();
  private readonly perPuller = new Map<string, number>();
  readonly cursors = new Map<string, number>();
  private readonly unreachable = new Map<number, ReadonlySet<string>>();

  constructor(private readonly ix: RegistryIndex) {}

  take(pullerId: string, sourceId: string, version: number, shard: number, bucketIndex: number): void {
    this.busy.set(sourceId, (this.busy.get(sourceId) ?? 0) + 1);
    this.serving.add(servingKey(sourceId, version, shard, bucketIndex));
    this.perPuller.set(pullerId, (this.perPuller.get(pullerId) ?? 0) + 1);
    this.fetching.add(pendingKey(version, shard, bucketIndex, pullerId));
  }
  busyOf(sourceId: string): number {
    return (this.ix.busy.get(sourceId) ?? 0) + (this.busy.get(sourceId) ?? 0);
  }
  taken(sourceId: string): boolean {
    return this.busy.has(sourceId);
  }
  serves(sourceId: string, version: number, shard: number, bucketIndex: number): boolean {
    const key = servingKey(sourceId, version, shard, bucketIndex);
    return this.ix.serving.has(key) || this.serving.has(key);
  }
  pending(version: number, shard: number, bucketIndex: number, pullerId: string): boolean {
    const key = pendingKey(version, shard, bucketIndex, pullerId);
    return this.ix.pending.has(key) || this.fetching.has(key);
  }
  inFlightFor(pullerId: string): number {
    return (this.ix.pullsOfPuller.get(pullerId)?.size ?? 0) + (this.perPuller.get(pullerId) ?? 0);
  }
  /** The first source of an idle list (in id order) not taken in this decision, not the puller and not `avoided`. */
  firstIdle(list: readonly string[] | undefined, cursorKey: string, pullerId: string, avoided: ReadonlySet<string>): string | undefined {
    if (!list) return undefined;
    let i = this.cursors.get(cursorKey) ?? 0;
    while (i < list.length && this.taken(list[i])) i++;
    this.cursors.set(cursorKey, i);
    for (; i < list.length; i++) if (list[i] !== pullerId && !this.taken(list[i]) && !avoided.has(list[i])) return list[i];
    return undefined;
  }
  /** `v.unreachable` as a set, made once per decision (the state does not change within one). */
  unreachableOf(v: WeightVersion): ReadonlySet<string> {
    let set = this.unreachable.get(v.version);
    if (!set) this.unreachable.set(v.version, (set = new Set(v.unreachable)));
    return set;
  }
}

/**
 * The source for bucket `index` of `shard` of `v` (see the rules above): the least loaded candidate, rollouts
 * before trainer ranks, then by id, unreachable ones last. A reachable candidate serving nothing is the
 * best there is: the first idle reachable holder, else the first idle reachable trainer rank (the index
 * lists them in id order). Otherwise every candidate is compared, as the rule reads — in one pass: at
 * thousands of machines some source is nearly always reported unreachable, and sorting every holder of
 * the bucket for each pull made a weight update quadratic in the rollouts.
 */
function chooseSource(
  state: WeightRegistryState,
  v: WeightVersion,
  shard: WeightShard,
  index: number,
  pullerId: string,
  relays: boolean,
  taken: Takes,
): { id: string; address: string } | undefined {
  const ix = state.index;
  const key = holderKey(v.version, shard.index, index);
  const ranks = shardKey(v.version, shard.index);
  const holders = relays ? ix.holders.get(key) : undefined;
  const unreachable = taken.unreachableOf(v);
  // A released trainer (paper §5.2.1: async resumes training after the first relay) is asked only for a
  // bucket no living rollout holds, or none its pullers can reach (paper §5.2.2: "find another relay
  // server"; the trainer is the last one). A shard's ranks serve that shard only.
  const asksTrainer = !v.trainerReleased || !holders?.size || !someReachable(holders, unreachable);
  const trainers = shardServed(state, shard) && asksTrainer ? ix.sourceAddress.get(ranks) : undefined;
  // liveRollouts (the holders) only lists machines with a weight server.
  const rolloutAt = (id: string) => ({ id, address: state.machines[id].weightsAddress ?? '' });
  const idleHolder = relays ? taken.firstIdle(ix.idleHolders.get(key), key, pullerId, unreachable) : undefined;
  if (idleHolder !== undefined) return rolloutAt(idleHolder);
  const idleTrainer = trainers ? taken.firstIdle(ix.idleTrainers.get(ranks), `t${ranks}`, pullerId, unreachable) : undefined;
  if (idleTrainer !== undefined) return { id: idleTrainer, address: trainers!.get(idleTrainer)! };

  let best: { id: string; rank: number; suspect: number; busy: number } | undefined;
  const consider = (id: string, rank: number) => {
    const c = { id, rank, suspect: unreachable.has(id) ? 1 : 0, busy: taken.busyOf(id) };
    if (!best || (c.suspect - best.suspect || c.busy - best.busy || c.rank - best.rank || byId(c.id, best.id)) < 0) best = c;
  };
  for (const r of holders ?? []) if (r !== pullerId && !taken.serves(r, v.version, shard.index, index)) consider(r, 0);
  for (const [id] of trainers ?? []) if (id !== pullerId && !isMachineDown(state, id) && !taken.serves(id, v.version, shard.index, index)) consider(id, 1);
  if (!best) return undefined;
  const chosen: { id: string; rank: number } = best;
  return chosen.rank === 0 ? rolloutAt(chosen.id) : { id: chosen.id, address: trainers!.get(chosen.id)! };
}

/** Whether some holder is not reported unreachable: the first reachable one ends the scan. */
function someReachable(holders: Iterable<string>, unreachable: ReadonlySet<string>): boolean {
  if (unreachable.size === 0) return true;
  for (const h of holders) if (!unreachable.has(h)) return true;
  return false;
}
