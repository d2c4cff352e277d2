import { draft } from '@robustrl/contracts';
import { newestWholeOf, whyNotRelaying } from './registry-reindex';
import { WeightRegistryDraft, WeightRegistryState } from './weight-registry.state';

/**
 * The relay set (paper §5.2.1 ➂): "a weight updated rollout will act as a relay server ... once weight
 * pulling is complete, they join the relay-server set". A relay is (instance, version) for the newest
 * live version a living rollout holds whole; it leaves when the instance dies, is lent or deregistered,
 * swaps to a newer whole version, or loses a bucket to a checksum failure.
 *
 * Note that serving starts earlier than relaying: the pull scheduler lets any holder of a bucket serve
 * that bucket (pipelining); joining the relay set is the "holds the whole version" milestone, the
 * trainer's release signal in async mode, and what the rollout pool records as a machine's version.
 *
 * Both read the index (`unjoined`, `staleRelays`) instead of checking every rollout and relay.
 */
export const RelaySet = {
  /** RelayJoined for every living rollout whose newest whole version is not yet in the set, in id order. */
  joins(state: WeightRegistryState): WeightRegistryDraft[] {
    return [...state.index.unjoined].sort().map((instanceId) => {
      const m = state.machines[instanceId];
      // A live rollout always has a weight server (liveRollouts), so the address is set.
      return draft('RelayJoined', { instanceId, version: newestWholeOf(state, instanceId)!, address: m.weightsAddress ?? m.address });
    });
  },

  /** RelayLeft for every relay that no longer serves its version, with why, in key order. */
  leaves(state: WeightRegistryState): WeightRegistryDraft[] {
    return [...state.index.staleRelays].sort().map((key) => {
      const { instanceId, version } = state.relays[key];
      return draft('RelayLeft', { instanceId, version, reason: whyNotRelaying(state, instanceId, version)! });
    });
  },
};
