import { draft } from '@robustrl/contracts';
import { byId, holderKey, pendingKey, RegistryIndex, servingKey } from './weight-registry.index';
import {
  attemptsOf,
  holdsBucket,
  isMachineDown,
  pullIdFor,
  trainerCanServe,
  WeightRegistryDraft,
  WeightRegistryState,
  WeightVersion,
} from './weight-registry.state';

export const DEFAULT_PULL_WINDOW = 1;

/**
 * PullScheduler — greedy, recomputed on every change (paper §5.2.1 ➁ ➂), from the index:
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
  for (const pullerId of pullers) {
    for (const bucket of v.buckets) {
      if (taken.inFlightFor(pullerId) >= window) break;
      if (holdsBucket(state, pullerId, version, bucket.index) || taken.pending(version, bucket.index, pullerId)) continue;
      const source = chooseSource(state, v, bucket.index, pullerId, relays, taken);
      if (!source) break;
      const attempt = attemptsOf(state, version, bucket.index, pullerId) + 1;
      out.push(
        draft('WeightPullAssigned', {
          pullId: pullIdFor(version, bucket.index, pullerId, attempt),
          version,
          bucketIndex: bucket.index,
          pullerId,
          sourceId: source.id,
          sourceAddress: source.address,
        }),
      );
      taken.take(pullerId, source.id, bucket.index, version);
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

  constructor(private readonly ix: RegistryIndex) {}

  take(pullerId: string, sourceId: string, bucketIndex: number, version: number): void {
    this.busy.set(sourceId, (this.busy.get(sourceId) ?? 0) + 1);
    this.serving.add(servingKey(sourceId, version, bucketIndex));
    this.perPuller.set(pullerId, (this.perPuller.get(pullerId) ?? 0) + 1);
    this.fetching.add(pendingKey(version, bucketIndex, pullerId));
  }
  busyOf(sourceId: string): number {
    return (this.ix.busy.get(sourceId) ?? 0) + (this.busy.get(sourceId) ?? 0);
  }
  taken(sourceId: string): boolean {
    return this.busy.has(sourceId);
  }
  serves(sourceId: string, version: number, bucketIndex: number): boolean {
    const key = servingKey(sourceId, version, bucketIndex);
    return this.ix.serving.has(key) || this.serving.has(key);
  }
  pending(version: number, bucketIndex: number, pullerId: string): boolean {
    const key = pendingKey(version, bucketIndex, pullerId);
    return this.ix.pending.has(key) || this.fetching.has(key);
  }
  inFlightFor(pullerId: string): number {
    return (this.ix.pullsOfPuller.get(pullerId)?.size ?? 0) + (this.perPuller.get(pullerId) ?? 0);
  }
  /** The first source of an idle list (in id order) not taken in this decision and not the puller. */
  firstIdle(list: readonly string[] | undefined, cursorKey: string, pullerId: string): string | undefined {
    if (!list) return undefined;
    let i = this.cursors.get(cursorKey) ?? 0;
    while (i < list.length && this.taken(list[i])) i++;
    this.cursors.set(cursorKey, i);
    for (; i < list.length; i++) if (list[i] !== pullerId && !this.taken(list[i])) return list[i];
    return undefined;
  }
}

/**
 * The source for bucket `index` of `v` (see the rules above): the least loaded candidate, rollouts
 * before trainer ranks, then by id, unreachable ones last. When no source is reported unreachable, a
 * candidate serving nothing is the best there is: the first idle holder, else the first idle trainer
 * rank (the index lists them in id order). Otherwise every candidate is compared, as the rule reads.
 */
function chooseSource(
  state: WeightRegistryState,
  v: WeightVersion,
  index: number,
  pullerId: string,
  relays: boolean,
  taken: Takes,
): { id: string; address: string } | undefined {
  const ix = state.index;
  const key = holderKey(v.version, index);
  const holders = relays ? ix.holders.get(key) : undefined;
  // A released trainer (paper §5.2.1: async resumes training after the first relay) is asked only for a
  // bucket no living rollout holds.
  const trainers = trainerCanServe(state, v) && (!v.trainerReleased || !holders?.size) ? ix.sourceAddress.get(v.version) : undefined;
  // liveRollouts (the holders) only lists machines with a weight server.
  const rolloutAt = (id: string) => ({ id, address: state.machines[id].weightsAddress ?? '' });
  if (v.unreachable.length === 0) {
    const idleHolder = relays ? taken.firstIdle(ix.idleHolders.get(key), key, pullerId) : undefined;
    if (idleHolder !== undefined) return rolloutAt(idleHolder);
    const idleTrainer = trainers ? taken.firstIdle(ix.idleTrainers.get(v.version), `t${v.version}`, pullerId) : undefined;
    if (idleTrainer !== undefined) return { id: idleTrainer, address: trainers!.get(idleTrainer)! };
  }
  const suspect = (id: string) => (v.unreachable.includes(id) ? 1 : 0);
  const candidates: Array<{ id: string; address: string; rank: number; suspect: number; busy: number }> = [];
  for (const r of holders ?? []) {
    if (r !== pullerId && !taken.serves(r, v.version, index)) candidates.push({ ...rolloutAt(r), rank: 0, suspect: suspect(r), busy: taken.busyOf(r) });
  }
  for (const [id, address] of trainers ?? []) {
    if (id !== pullerId && !isMachineDown(state, id) && !taken.serves(id, v.version, index))
      candidates.push({ id, address, rank: 1, suspect: suspect(id), busy: taken.busyOf(id) });
  }
  if (candidates.length === 0) return undefined;
  candidates.sort((a, b) => a.suspect - b.suspect || a.busy - b.busy || a.rank - b.rank || byId(a.id, b.id));
  return candidates[0];
}
