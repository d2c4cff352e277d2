import { assertNever } from '@robustrl/domain-kit';
import { adoptPendingPublications, dropPendingPublication, foldAuthorizedPublication, raiseFence } from '../../src/publication-authority';
import { dropCopies, foldTrainerFault } from '../../src/shard-publication';
import {
  attemptKey,
  inFlight,
  shardOf,
  ShardHoldings,
  attemptsOf,
  blamesSource,
  holdsWhole,
  isCorruption,
  liveRollouts,
  pullIdFor,
  RegistryFact,
  RegistryMachine,
  repeatsRegistration,
  relayKey,
  WeightRegistryState,
} from './weight-registry.state';

/**
 * Folds one fact into the registry state. Idempotent on redelivery: every case checks whether the fact
 * is already reflected (pull no longer in flight, relay already present, membership event older than
 * the machine's current status) — the registry also reads its own outputs back from the weights topic.
 */
export function evolveWeightRegistry(state: WeightRegistryState, fact: RegistryFact): WeightRegistryState {
  const at = fact.occurredAt ? Date.parse(fact.occurredAt) : Number.MAX_SAFE_INTEGER;
  switch (fact.type) {
    case 'JobStarted':
      return raiseFence(state.mode === fact.data.mode ? state : { ...state, mode: fact.data.mode }, fact.data.trainerEpoch);

    case 'RestartTrainerGroup':
    case 'RestartTask':
      // A group formed again fences every older one (publication-authority.ts).
      return raiseFence(state, fact.data.trainerEpoch);

    case 'MachineRegistered': {
      const d = fact.data;
      const m = state.machines[d.machineId];
      if (m && (repeatsRegistration(m, d) || at < m.since)) return state;
      // A (re)joining machine starts with no weights: a replaced rollout pulls the latest (paper §5.2.1 ➂).
      return adoptPendingPublications(
        withoutHoldings(
          withMachine(state, {
            machineId: d.machineId,
            role: d.role,
            status: 'alive',
            address: d.agentAddress,
            weightsAddress: d.weightsAddress ?? null,
            reason: 'registered',
            since: at,
            ...(d.incarnation ? { incarnation: d.incarnation } : {}),
          }),
          d.machineId,
        ),
      );
    }

    case 'MachineDeregistered': {
      const m = state.machines[fact.data.machineId];
      if (!m || m.status === 'down' || at < m.since) return state;
      return withMachine(state, { ...m, status: 'down', reason: `left the job: ${fact.data.reason}`, since: at });
    }

    case 'MachineRoleChanged': {
      const d = fact.data;
      const m = state.machines[d.machineId];
      if (!m || at < m.since || (m.role === d.to && m.status === 'alive')) return state;
      // Lent to the trainer or back to serving: either way its rollout weights are gone.
      const reason = d.to === 'rollout' ? `became rollout: ${d.reason}` : `became ${d.to}: ${d.reason}`;
      return adoptPendingPublications(withoutHoldings(withMachine(state, { ...m, role: d.to, status: 'alive', reason, since: at }), d.machineId));
    }

    case 'PromoteRolloutToTrainer': {
      const m = state.machines[fact.data.rolloutMachineId];
      if (!m || m.role !== 'rollout' || m.status !== 'alive' || at < m.since) return state;
      const reason = `lent to the trainer as warm standby for ${fact.data.replacesMachineId}`;
      return adoptPendingPublications(withoutHoldings(withMachine(state, { ...m, role: 'trainer', reason, since: at }), m.machineId));
    }

    case 'FaultConfirmed': {
      const d = fact.data;
      let next = d.handledAs === 'trainer' ? foldTrainerFault(state, at) : state;
      const m = next.machines[d.machineId];
      const machineGone = d.handledAs === 'rollout' || d.machineFaulty;
      if (m && machineGone && m.status !== 'down' && at >= m.since) {
        next = withMachine(next, { ...m, status: 'down', reason: `confirmed faulty (${d.rule})`, since: at });
      }
      return next;
    }

    case 'WeightVersionPublished':
      return foldAuthorizedPublication(state, fact.data, at, fact.eventId ?? `published/${fact.data.version}/${at}`);

    case 'WeightPublicationRefused':
      return dropPendingPublication(state, fact.data.publicationId);

    case 'WeightPullAssigned': {
      const d = fact.data;
      if (state.pulls[d.pullId]) return state;
      const key = attemptKey(d.version, d.pullerId);
      const shard = shardOf(d);
      const attempt = attemptsOf(state, d.version, shard, d.bucketIndex, d.pullerId) + 1;
      // Only the next pull id of its (version, shard, bucket, puller) applies: a redelivered older one does not.
      if (d.pullId !== pullIdFor(d.version, shard, d.bucketIndex, d.pullerId, attempt)) return state;
      const mine = state.attempts[key] ?? {};
      return {
        ...state,
        pulls: { ...state.pulls, [d.pullId]: inFlight(d, state.machines[d.pullerId]?.incarnation) },
        attempts: { ...state.attempts, [key]: { ...mine, [shard]: { ...mine[shard], [d.bucketIndex]: attempt } } },
      };
    }

    case 'WeightPullCompleted': {
      const d = fact.data;
      const pull = state.pulls[d.pullId];
      // A pull the registry already failed (or a redelivery) adds nothing: the puller was told to drop it.
      if (!pull) return state;
      let next = withoutPull(state, d.pullId);
      const v = next.versions[pull.version];
      if (v && v.unreachable.includes(pull.sourceId)) {
        next = { ...next, versions: { ...next.versions, [v.version]: { ...v, unreachable: v.unreachable.filter((x) => x !== pull.sourceId) } } };
      }
      if (!v || v.status !== 'live') return next;
      const mine = next.holdings[pull.pullerId] ?? {};
      const shards = mine[pull.version] ?? {};
      const shard = shardOf(pull);
      return {
        ...next,
        holdings: {
          ...next.holdings,
          [pull.pullerId]: { ...mine, [pull.version]: { ...shards, [shard]: { ...(shards[shard] ?? {}), [pull.bucketIndex]: pull.pullId } } },
        },
      };
    }

    case 'WeightPullFailed': {
      const d = fact.data;
      const pull = state.pulls[d.pullId];
      if (pull) {
        let next = withoutPull(state, d.pullId);
        const v = next.versions[pull.version];
        // "If a weight pull fails, it will find another relay server to pull from" (paper §5.2.2).
        if (v && blamesSource(d.reason) && !v.unreachable.includes(pull.sourceId)) {
          next = { ...next, versions: { ...next.versions, [v.version]: { ...v, unreachable: [...v.unreachable, pull.sourceId].sort() } } };
        }
        return next;
      }
      // A checksum failure found after completion (e.g. whole-version verification): forget exactly the
      // copy that pull delivered, so the bucket is pulled again; a redelivery finds a newer copy and stops.
      const shard = shardOf(d);
      if (isCorruption(d.reason) && state.holdings[d.pullerId]?.[d.version]?.[shard]?.[d.bucketIndex] === d.pullId) {
        const mine = state.holdings[d.pullerId];
        const buckets = { ...mine[d.version][shard] };
        delete buckets[d.bucketIndex];
        return { ...state, holdings: { ...state.holdings, [d.pullerId]: { ...mine, [d.version]: { ...mine[d.version], [shard]: buckets } } } };
      }
      return state;
    }

    case 'RelayJoined': {
      const d = fact.data;
      const key = relayKey(d.instanceId, d.version);
      if (state.relays[key]) return state;
      let next: WeightRegistryState = { ...state, relays: { ...state.relays, [key]: { instanceId: d.instanceId, version: d.version, address: d.address } } };
      // A rollout swaps to the newer version once it holds it whole: its older copies are gone.
      const mine = next.holdings[d.instanceId];
      if (mine) {
        const kept: Record<number, ShardHoldings> = {};
        for (const [version, buckets] of Object.entries(mine)) if (Number(version) >= d.version) kept[Number(version)] = buckets;
        next = { ...next, holdings: { ...next.holdings, [d.instanceId]: kept } };
      }
      const v = next.versions[d.version];
      if (v && !v.trainerReleased) {
        const released = next.mode === 'async' || liveRollouts(next).every((r) => holdsWhole(next, r, d.version));
        if (released) next = { ...next, versions: { ...next.versions, [d.version]: { ...v, trainerReleased: true } } };
      }
      return next;
    }

    case 'RelayLeft': {
      const key = relayKey(fact.data.instanceId, fact.data.version);
      if (!state.relays[key]) return state;
      const relays = { ...state.relays };
      delete relays[key];
      return { ...state, relays };
    }

    case 'TrainerReleased': {
      const v = state.versions[fact.data.version];
      if (!v || v.releaseAnnounced) return state;
      return { ...state, versions: { ...state.versions, [v.version]: { ...v, trainerReleased: true, releaseAnnounced: true } } };
    }

    case 'WeightVersionRetired': {
      const v = state.versions[fact.data.version];
      if (!v || v.status === 'retired') return state;
      // Retired (or abandoned): every copy of it is forgotten, whole or partial (paper §5.2.2). Its pull
      // attempt counters go too: nothing pulls a retired version again, and a long job would otherwise
      // keep (and copy on every assignment) counters for every version it ever ran.
      const prefix = `${v.version}/`;
      let highest = state.retiredAttempts[v.version] ?? 0;
      for (const [key, perShard] of Object.entries(state.attempts))
        if (key.startsWith(prefix)) for (const perBucket of Object.values(perShard)) highest = Math.max(highest, ...Object.values(perBucket));
      const attempts = Object.fromEntries(Object.entries(state.attempts).filter(([key]) => !key.startsWith(prefix)));
      const retiredAttempts = { ...state.retiredAttempts, [v.version]: highest };
      return dropCopies({ ...state, attempts, retiredAttempts, versions: { ...state.versions, [v.version]: { ...v, status: 'retired' } } }, v.version);
    }
    default:
      return assertNever(fact, 'weight registry fact');
  }
}

function withMachine(state: WeightRegistryState, machine: RegistryMachine): WeightRegistryState {
  return { ...state, machines: { ...state.machines, [machine.machineId]: machine } };
}

function withoutHoldings(state: WeightRegistryState, instanceId: string): WeightRegistryState {
  if (!state.holdings[instanceId]) return state;
  const holdings = { ...state.holdings };
  delete holdings[instanceId];
  return { ...state, holdings };
}

function withoutPull(state: WeightRegistryState, pullId: string): WeightRegistryState {
  const pulls = { ...state.pulls };
  delete pulls[pullId];
  return { ...state, pulls };
}
