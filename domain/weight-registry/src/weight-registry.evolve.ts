import { assertNever } from '@robustrl/domain-kit';
import { adoptPendingPublications, dropPendingPublication, foldAuthorizedPublication, raiseFence } from './publication-authority';
import { dropCopies, foldTrainerFault } from './shard-publication';
import { addPull, machineChanged, rebuildRegistryIndex, refreshInstance, removePull } from './registry-reindex';
import {
  attemptKey,
  inFlight,
  RegistryData,
  shardOf,
  attemptsOf,
  blamesSource,
  isCorruption,
  pullIdFor,
  RegistryFact,
  RegistryMachine,
  repeatsRegistration,
  relayKey,
  WeightRegistryState,
} from './weight-registry.state';

/**
 * Folds one fact into the registry state, in place (the decider evolves `in-place`: a job of thousands
 * of rollouts cannot copy its pull and holding tables per pull), keeping the derived index in step.
 * Idempotent on redelivery: every case checks whether the fact is already reflected (pull no longer in
 * flight, relay already present, membership event older than the machine's current status) — the
 * registry also reads its own outputs back from the weights topic. Objects the state shares with a
 * message (a shard's sources) are replaced, never written.
 */
export function evolveWeightRegistry(state: WeightRegistryState, fact: RegistryFact): WeightRegistryState {
  const at = fact.occurredAt ? Date.parse(fact.occurredAt) : Number.MAX_SAFE_INTEGER;
  switch (fact.type) {
    case 'JobStarted':
      state.mode = fact.data.mode;
      adopt(state, raiseFence(state, fact.data.trainerEpoch));
      return state;

    case 'MachineRegistered': {
      const d = fact.data;
      const m = state.machines[d.machineId];
      if (m && (repeatsRegistration(m, d) || at < m.since)) return state;
      // A (re)joining machine starts with no weights: a replaced rollout pulls the latest (paper §5.2.1 ➂).
      setMachine(state, {
        machineId: d.machineId,
        role: d.role,
        status: 'alive',
        address: d.agentAddress,
        weightsAddress: d.weightsAddress ?? null,
        reason: 'registered',
        since: at,
        ...(d.incarnation ? { incarnation: d.incarnation } : {}),
      });
      delete state.holdings[d.machineId];
      machineChanged(state, d.machineId);
      adoptHeld(state);
      return state;
    }

    case 'MachineDeregistered': {
      const m = state.machines[fact.data.machineId];
      if (!m || m.status === 'down' || at < m.since) return state;
      setMachine(state, { ...m, status: 'down', reason: `left the job: ${fact.data.reason}`, since: at });
      machineChanged(state, m.machineId);
      return state;
    }

    case 'MachineRoleChanged': {
      const d = fact.data;
      const m = state.machines[d.machineId];
      if (!m || at < m.since || (m.role === d.to && m.status === 'alive')) return state;
      // Lent to the trainer or back to serving: either way its rollout weights are gone.
      const reason = d.to === 'rollout' ? `became rollout: ${d.reason}` : `became ${d.to}: ${d.reason}`;
      setMachine(state, { ...m, role: d.to, status: 'alive', reason, since: at });
      delete state.holdings[d.machineId];
      machineChanged(state, d.machineId);
      adoptHeld(state);
      return state;
    }

    case 'PromoteRolloutToTrainer': {
      const m = state.machines[fact.data.rolloutMachineId];
      if (!m || m.role !== 'rollout' || m.status !== 'alive' || at < m.since) return state;
      const reason = `lent to the trainer as warm standby for ${fact.data.replacesMachineId}`;
      setMachine(state, { ...m, role: 'trainer', reason, since: at });
      delete state.holdings[m.machineId];
      machineChanged(state, m.machineId);
      adoptHeld(state);
      return state;
    }

    case 'RestartTrainerGroup':
    case 'RestartTask':
      // A group formed again fences every older one (publication-authority.ts).
      adopt(state, raiseFence(state, fact.data.trainerEpoch));
      return state;

    case 'FaultConfirmed': {
      const d = fact.data;
      if (d.handledAs === 'trainer') adopt(state, foldTrainerFault(state, at));
      const m = state.machines[d.machineId];
      const machineGone = d.handledAs === 'rollout' || d.machineFaulty;
      if (m && machineGone && m.status !== 'down' && at >= m.since) {
        setMachine(state, { ...m, status: 'down', reason: `confirmed faulty (${d.rule})`, since: at });
        machineChanged(state, m.machineId);
      }
      return state;
    }

    case 'WeightVersionPublished':
      // One trainer rank's shard: added, refreshed or replaced (shard-publication.ts), once the roster
      // says its publisher is a trainer; held until then (publication-authority.ts).
      adopt(state, foldAuthorizedPublication(state, fact.data, at, fact.eventId ?? `published/${fact.data.version}/${at}`));
      return state;

    case 'WeightPublicationRefused':
      adopt(state, dropPendingPublication(state, fact.data.publicationId));
      return state;

    case 'WeightPullAssigned': {
      const d = fact.data;
      if (state.pulls[d.pullId]) return state;
      const key = attemptKey(d.version, d.pullerId);
      const shard = shardOf(d);
      const attempt = attemptsOf(state, d.version, shard, d.bucketIndex, d.pullerId) + 1;
      // Only the next pull id of its (version, shard, bucket, puller) applies: a redelivered older one does not.
      if (d.pullId !== pullIdFor(d.version, shard, d.bucketIndex, d.pullerId, attempt)) return state;
      const pull = inFlight(d, state.machines[d.pullerId]?.incarnation);
      state.pulls[d.pullId] = pull;
      ((state.attempts[key] ??= {})[shard] ??= {})[d.bucketIndex] = attempt;
      addPull(state, pull);
      return state;
    }

    case 'WeightPullCompleted': {
      const d = fact.data;
      const pull = state.pulls[d.pullId];
      // A pull the registry already failed (or a redelivery) adds nothing: the puller was told to drop it.
      if (!pull) return state;
      delete state.pulls[d.pullId];
      removePull(state, pull);
      const v = state.versions[pull.version];
      if (v && v.unreachable.includes(pull.sourceId)) {
        state.versions[v.version] = { ...v, unreachable: v.unreachable.filter((x) => x !== pull.sourceId) };
      }
      // A shard replaced since (shard-publication.ts) took its in-flight pulls with it: this one is not here.
      if (!v || v.status !== 'live') return state;
      (((state.holdings[pull.pullerId] ??= {})[pull.version] ??= {})[shardOf(pull)] ??= {})[pull.bucketIndex] = pull.pullId;
      refreshInstance(state, pull.pullerId);
      return state;
    }

    case 'WeightPullFailed': {
      const d = fact.data;
      const pull = state.pulls[d.pullId];
      if (pull) {
        delete state.pulls[d.pullId];
        removePull(state, pull);
        const v = state.versions[pull.version];
        // "If a weight pull fails, it will find another relay server to pull from" (paper §5.2.2).
        if (v && blamesSource(d.reason) && !v.unreachable.includes(pull.sourceId)) {
          state.versions[v.version] = { ...v, unreachable: [...v.unreachable, pull.sourceId].sort() };
        }
        return state;
      }
      // A checksum failure found after completion (e.g. whole-version verification): forget exactly the
      // copy that pull delivered, so the bucket is pulled again; a redelivery finds a newer copy and stops.
      const shard = shardOf(d);
      if (isCorruption(d.reason) && state.holdings[d.pullerId]?.[d.version]?.[shard]?.[d.bucketIndex] === d.pullId) {
        delete state.holdings[d.pullerId][d.version][shard][d.bucketIndex];
        refreshInstance(state, d.pullerId);
      }
      return state;
    }

    case 'RelayJoined': {
      const d = fact.data;
      const key = relayKey(d.instanceId, d.version);
      if (state.relays[key]) return state;
      state.relays[key] = { instanceId: d.instanceId, version: d.version, address: d.address };
      const relaysOf = state.index.relaysOf;
      relaysOf.set(d.instanceId, (relaysOf.get(d.instanceId) ?? new Set()).add(key));
      // A rollout swaps to the newer version once it holds it whole: its older copies are gone.
      const mine = state.holdings[d.instanceId];
      if (mine) for (const version of Object.keys(mine)) if (Number(version) < d.version) delete mine[Number(version)];
      refreshInstance(state, d.instanceId);
      const v = state.versions[d.version];
      if (v && !v.trainerReleased) {
        // Every live rollout holds it whole (the index counts them; none at all counts as every one).
        const released = state.mode === 'async' || (state.index.wholeCount.get(d.version) ?? 0) === state.index.rollouts.length;
        if (released) state.versions[d.version] = { ...v, trainerReleased: true };
      }
      return state;
    }

    case 'RelayLeft': {
      const key = relayKey(fact.data.instanceId, fact.data.version);
      if (!state.relays[key]) return state;
      delete state.relays[key];
      const ix = state.index;
      const mine = ix.relaysOf.get(fact.data.instanceId);
      mine?.delete(key);
      if (mine?.size === 0) ix.relaysOf.delete(fact.data.instanceId);
      ix.staleRelays.delete(key);
      refreshInstance(state, fact.data.instanceId);
      return state;
    }

    case 'TrainerReleased': {
      const v = state.versions[fact.data.version];
      if (!v || v.releaseAnnounced) return state;
      state.versions[v.version] = { ...v, trainerReleased: true, releaseAnnounced: true };
      return state;
    }

    case 'WeightVersionRetired': {
      const v = state.versions[fact.data.version];
      if (!v || v.status === 'retired') return state;
      // Retired (or abandoned): every copy of it is forgotten, whole or partial (paper §5.2.2). Its pull
      // attempt counters go too: nothing pulls a retired version again, and a long job would otherwise
      // keep counters for every version it ever ran.
      const prefix = `${v.version}/`;
      let highest = state.retiredAttempts[v.version] ?? 0;
      for (const [key, perShard] of Object.entries(state.attempts)) {
        if (!key.startsWith(prefix)) continue;
        for (const perBucket of Object.values(perShard)) highest = Math.max(highest, ...Object.values(perBucket));
        delete state.attempts[key];
      }
      state.retiredAttempts[v.version] = highest;
      state.versions[v.version] = { ...v, status: 'retired' };
      adopt(state, dropCopies(state, v.version));
      return state;
    }
    default:
      return assertNever(fact, 'weight registry fact');
  }
}

/** A roster change may make held publications' publishers trainers (publication-authority.ts). */
function adoptHeld(state: WeightRegistryState): void {
  if (Object.keys(state.pendingPublications).length > 0) adopt(state, adoptPendingPublications(state));
}

function setMachine(state: WeightRegistryState, machine: RegistryMachine): void {
  state.machines[machine.machineId] = machine;
}

/**
 * Takes over the facts a fold of shard-publication.ts returned (records it replaced, never wrote) and
 * rebuilds the index from them: publications, trainer faults and retirements are rare.
 */
function adopt(state: WeightRegistryState, next: RegistryData): void {
  if (next === state) return;
  state.pendingPublications = next.pendingPublications;
  if (next.trainerEpoch !== undefined) state.trainerEpoch = next.trainerEpoch;
  // Held publications are not indexed: holding or refusing one changes nothing the index derives.
  if (next.versions === state.versions && next.holdings === state.holdings && next.pulls === state.pulls && next.relays === state.relays) return;
  state.versions = next.versions;
  state.holdings = next.holdings;
  state.pulls = next.pulls;
  state.relays = next.relays;
  rebuildRegistryIndex(state);
}
