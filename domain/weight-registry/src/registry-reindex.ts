import { add, byId, count, insertSorted, push, remove, removeSorted, sortedIndex } from './collections';
import { holderKey, pendingKey, RegistryIndex, servingKey, shardKey } from './registry-index';
import type { InFlightPull, RegistryData, WeightRegistryState } from './weight-registry.state';
import {
  holdsBucket,
  initialRegistryData,
  isLiveRollout,
  isMachineDown,
  liveRollouts,
  machineOf,
  publishedShards,
  pullerRestarted,
  relayKey,
  shardOf,
} from './weight-registry.state';

/** The index of `data`, from scratch; `data` becomes the state (the index is attached to it). */
export function rebuildRegistryIndex(data: RegistryData): WeightRegistryState {
  const s = data as WeightRegistryState;
  const ix = new RegistryIndex();
  s.index = ix;
  ix.live = Object.values(s.versions)
    .filter((v) => v.status === 'live')
    .map((v) => v.version)
    .sort((a, b) => a - b);
  ix.rollouts = liveRollouts(s);
  for (const r of ix.rollouts) ix.rolloutSet.add(r);
  for (const version of ix.live) {
    for (const shard of publishedShards(s.versions[version])) {
      const key = shardKey(version, shard.index);
      const addresses = new Map<string, string>();
      for (const src of shard.sources) {
        if (addresses.has(src.instanceId)) continue;
        addresses.set(src.instanceId, src.address);
        push(ix.sourceShards, src.instanceId, key);
        ix.sourceMachines.add(machineOf(src.instanceId));
      }
      ix.sourceAddress.set(key, addresses);
    }
  }
  for (const key of Object.keys(s.relays)) add(ix.relaysOf, s.relays[key].instanceId, key);
  for (const p of Object.values(s.pulls)) indexPull(s, p);
  for (const [key, addresses] of ix.sourceAddress) {
    const idle = [...addresses.keys()].filter((id) => !isMachineDown(s, id) && !ix.busy.get(id)).sort(byId);
    if (idle.length > 0) ix.idleTrainers.set(key, idle);
  }
  const instances = new Set([...ix.rollouts, ...ix.relaysOf.keys(), ...ix.pullsOfPuller.keys(), ...ix.pullsOfSourceMachine.keys()]);
  // The idle holders of a bucket listed in any order, then sorted once: inserting each in its place kept
  // a rebuild (several a step at thousands of rollouts) searching and splicing.
  for (const id of instances) indexInstance(s, id, undefined, true);
  for (const list of ix.idleHolders.values()) list.sort(byId);
  return s;
}

/**
 * After a change to what one instance holds, relays or is (a rollout or not): its part of the index
 * again. The bucket lists (`holders`, `idleHolders`) change only where its holdings did: a completed
 * pull adds one bucket, and taking every held bucket out of the sorted idle lists and putting it back
 * cost a search and a splice per bucket per pull.
 */
export function refreshInstance(s: WeightRegistryState, id: string): void {
  const before = s.index.heldKeys.get(id);
  unindexInstance(s, id, true);
  indexInstance(s, id, before ? new Set(before) : undefined);
  const ix = s.index;
  const after = ix.heldKeys.get(id);
  if (!before) return;
  const kept = new Set(after);
  for (const key of before) {
    if (kept.has(key)) continue;
    remove(ix.holders, key, id);
    removeSorted(ix.idleHolders, key, id);
  }
}

/**
 * After a machine's membership changed (registered, left, lent, confirmed faulty): a machine running a
 * trainer source rebuilds the index (a trainer source's serving changes everywhere), any other updates
 * the rollout list and its own part.
 */
export function machineChanged(s: WeightRegistryState, id: string): void {
  const ix = s.index;
  if (ix.sourceMachines.has(id)) {
    rebuildRegistryIndex(s);
    return;
  }
  const live = isLiveRollout(s, id);
  if (live !== ix.rolloutSet.has(id)) {
    unindexInstance(s, id);
    if (live) {
      ix.rolloutSet.add(id);
      ix.rollouts.splice(sortedIndex(ix.rollouts, id, codeUnitOrder), 0, id);
    } else {
      ix.rolloutSet.delete(id);
      ix.rollouts.splice(ix.rollouts.indexOf(id), 1);
    }
    indexInstance(s, id);
  } else refreshInstance(s, id);
}

/** A pull now in `s.pulls`. */
export function addPull(s: WeightRegistryState, p: InFlightPull): void {
  indexPull(s, p);
  const ix = s.index;
  if (ix.busy.get(p.sourceId) === 1) setIdle(s, p.sourceId, false);
  movePuller(ix, p.pullerId);
}

/** A pull no longer in `s.pulls`. */
export function removePull(s: WeightRegistryState, p: InFlightPull): void {
  const ix = s.index;
  remove(ix.pullsOfPuller, p.pullerId, p.pullId);
  remove(ix.pullsOfSourceMachine, machineOf(p.sourceId), p.pullId);
  remove(ix.pullsOfVersion, p.version, p.pullId);
  const busy = count(ix.busy, p.sourceId, -1);
  count(ix.serving, servingKey(p.sourceId, p.version, shardOf(p), p.bucketIndex), -1);
  count(ix.pending, pendingKey(p.version, shardOf(p), p.bucketIndex, p.pullerId), -1);
  ix.stalePulls.delete(p.pullId);
  if (busy === 0) setIdle(s, p.sourceId, true);
  movePuller(ix, p.pullerId);
}

/** The newest live version `id` holds whole (a live rollout), as `newestWhole` computes it. */
export const newestWholeOf = (s: WeightRegistryState, id: string): number | undefined => s.index.whole.get(id)?.at(-1);

/** Why a relay no longer serves (RelaySet.leaves' reason), or null; from the index. */
export function whyNotRelaying(s: WeightRegistryState, instanceId: string, version: number): string | null {
  if (!s.index.rolloutSet.has(instanceId)) return s.machines[instanceId]?.reason ?? 'no longer a rollout of the job';
  if (s.versions[version]?.status !== 'live') return `version ${version} retired`;
  const whole = s.index.whole.get(instanceId) ?? [];
  const newest = whole.at(-1);
  if (newest !== undefined && newest > version) return `superseded by version ${newest}`;
  if (!whole.includes(version)) return `no longer holds version ${version} whole (a bucket failed its checksum, or its agent restarted)`;
  return null;
}

/** Whether an in-flight pull must fail (`stalePulls`): its puller stopped serving or restarted since, or its source no longer serves. */
function pullIsStale(s: WeightRegistryState, p: InFlightPull): boolean {
  if (!s.index.rolloutSet.has(p.pullerId) || pullerRestarted(s.machines, p)) return true;
  const v = s.versions[p.version];
  if (!v || v.status !== 'live') return true;
  const shard = v.shards[shardOf(p)];
  if (!shard) return true;
  if (s.index.sourceAddress.get(shardKey(p.version, shard.index))?.has(p.sourceId)) return !(shard.trainerServing && !isMachineDown(s, p.sourceId));
  return !(s.index.rolloutSet.has(p.sourceId) && holdsBucket(s, p.sourceId, p.version, p.bucketIndex, shard.index));
}

function indexPull(s: WeightRegistryState, p: InFlightPull): void {
  const ix = s.index;
  add(ix.pullsOfPuller, p.pullerId, p.pullId);
  add(ix.pullsOfSourceMachine, machineOf(p.sourceId), p.pullId);
  add(ix.pullsOfVersion, p.version, p.pullId);
  count(ix.busy, p.sourceId, 1);
  count(ix.serving, servingKey(p.sourceId, p.version, shardOf(p), p.bucketIndex), 1);
  count(ix.pending, pendingKey(p.version, shardOf(p), p.bucketIndex, p.pullerId), 1);
  if (pullIsStale(s, p)) ix.stalePulls.add(p.pullId);
}

/**
 * `listed`: the bucket keys `id` is in the bucket lists under already (they are left as they are);
 * `unsorted`: append to the idle lists (a rebuild sorts them at the end).
 */
function indexInstance(s: WeightRegistryState, id: string, listed?: ReadonlySet<string>, unsorted = false): void {
  const ix = s.index;
  if (ix.rolloutSet.has(id)) {
    const held = s.holdings[id];
    const keys: string[] = [];
    const whole: number[] = [];
    const idle = !ix.busy.get(id);
    for (const version of ix.live) {
      const v = s.versions[version];
      // Whole: every bucket of every one of its `count` shards, so a shard still unpublished is missing.
      let all = Object.keys(v.shards).length === v.count;
      for (const shard of publishedShards(v)) {
        const buckets = held?.[version]?.[shard.index];
        for (const b of shard.buckets) {
          if (buckets?.[b.index] === undefined) {
            all = false;
            continue;
          }
          const key = holderKey(version, shard.index, b.index);
          keys.push(key);
          if (listed?.has(key)) continue;
          add(ix.holders, key, id);
          if (idle && unsorted) push(ix.idleHolders, key, id);
          else if (idle) insertSorted(ix.idleHolders, key, id);
        }
      }
      if (all) {
        whole.push(version);
        count(ix.wholeCount, version, 1);
      }
    }
    ix.heldKeys.set(id, keys);
    ix.whole.set(id, whole);
    const newest = whole.at(-1);
    if (newest !== undefined) {
      count(ix.newestWholeCount, newest, 1);
      if (!s.relays[relayKey(id, newest)]) ix.unjoined.add(id);
    }
    const target = ix.live.at(-1);
    if (target !== undefined && newest !== target) {
      const inFlight = ix.pullsOfPuller.get(id)?.size ?? 0;
      ix.incomplete.set(id, inFlight);
      add(ix.incompleteBy, inFlight, id);
    }
  }
  for (const key of ix.relaysOf.get(id) ?? []) {
    const r = s.relays[key];
    if (whyNotRelaying(s, r.instanceId, r.version) !== null) ix.staleRelays.add(key);
    else ix.staleRelays.delete(key);
  }
  for (const pulls of [ix.pullsOfPuller.get(id), ix.pullsOfSourceMachine.get(id)]) {
    for (const pullId of pulls ?? []) {
      if (pullIsStale(s, s.pulls[pullId])) ix.stalePulls.add(pullId);
      else ix.stalePulls.delete(pullId);
    }
  }
}

/** `keepListed`: leave `id` in the bucket lists (the caller updates them by difference). */
function unindexInstance(s: WeightRegistryState, id: string, keepListed = false): void {
  const ix = s.index;
  if (!keepListed) {
    for (const key of ix.heldKeys.get(id) ?? []) {
      remove(ix.holders, key, id);
      removeSorted(ix.idleHolders, key, id);
    }
  }
  ix.heldKeys.delete(id);
  const whole = ix.whole.get(id) ?? [];
  for (const version of whole) count(ix.wholeCount, version, -1);
  if (whole.length > 0) count(ix.newestWholeCount, whole.at(-1)!, -1);
  ix.whole.delete(id);
  ix.unjoined.delete(id);
  const inFlight = ix.incomplete.get(id);
  if (inFlight !== undefined) {
    remove(ix.incompleteBy, inFlight, id);
    ix.incomplete.delete(id);
  }
}

/** A source's load went to or from zero: it joins or leaves the idle lists it belongs to. */
function setIdle(s: WeightRegistryState, sourceId: string, idle: boolean): void {
  const ix = s.index;
  for (const key of ix.heldKeys.get(sourceId) ?? []) {
    if (idle) insertSorted(ix.idleHolders, key, sourceId);
    else removeSorted(ix.idleHolders, key, sourceId);
  }
  if (isMachineDown(s, sourceId)) return;
  for (const key of ix.sourceShards.get(sourceId) ?? []) {
    if (idle) insertSorted(ix.idleTrainers, key, sourceId);
    else removeSorted(ix.idleTrainers, key, sourceId);
  }
}

/** A puller's pulls in flight changed: it moves to its new count (if it is missing the newest version). */
function movePuller(ix: RegistryIndex, pullerId: string): void {
  const before = ix.incomplete.get(pullerId);
  if (before === undefined) return;
  const now = ix.pullsOfPuller.get(pullerId)?.size ?? 0;
  if (now === before) return;
  remove(ix.incompleteBy, before, pullerId);
  add(ix.incompleteBy, now, pullerId);
  ix.incomplete.set(pullerId, now);
}

const codeUnitOrder = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** A new job's registry: no facts, and the index of none. */
export const initialWeightRegistryState = (): WeightRegistryState => rebuildRegistryIndex(initialRegistryData());
