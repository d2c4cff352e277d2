import { draft } from '@robustrl/contracts';
import { holdsWhole, isLiveRollout, liveRollouts, newestWhole, relayKey, WeightRegistryDraft, WeightRegistryState } from './weight-registry.state';

/**
 * The relay set (paper §5.2.1 ➂): "a weight updated rollout will act as a relay server ... once weight
 * pulling is complete, they join the relay-server set". A relay is (instance, version) for the newest
 * live version a living rollout holds whole; it leaves when the instance dies, is lent or deregistered,
 * swaps to a newer whole version, or loses a bucket to a checksum failure.
 *
 * Note that serving starts earlier than relaying: the pull scheduler lets any holder of a bucket serve
 * that bucket (pipelining); joining the relay set is the "holds the whole version" milestone, the
 * trainer's release signal in async mode, and what the rollout pool records as a machine's version.
 */
export const RelaySet = {
  /** RelayJoined for every living rollout whose newest whole version is not yet in the set. */
  joins(state: WeightRegistryState): WeightRegistryDraft[] {
    const out: WeightRegistryDraft[] = [];
    for (const instanceId of liveRollouts(state)) {
      const version = newestWhole(state, instanceId);
      if (version !== undefined && !state.relays[relayKey(instanceId, version)]) {
        // A live rollout always has a weight server (liveRollouts), so the address is set.
        out.push(draft('RelayJoined', { instanceId, version, address: state.machines[instanceId].weightsAddress ?? state.machines[instanceId].address }));
      }
    }
    return out;
  },

  /** RelayLeft for every relay that no longer serves its version, with why. */
  leaves(state: WeightRegistryState): WeightRegistryDraft[] {
    const out: WeightRegistryDraft[] = [];
    for (const key of Object.keys(state.relays).sort()) {
      const { instanceId, version } = state.relays[key];
      const reason = whyNotRelaying(state, instanceId, version);
      if (reason) out.push(draft('RelayLeft', { instanceId, version, reason }));
    }
    return out;
  },
};

function whyNotRelaying(state: WeightRegistryState, instanceId: string, version: number): string | null {
  if (!isLiveRollout(state, instanceId)) return state.machines[instanceId]?.reason ?? 'no longer a rollout of the job';
  if (state.versions[version]?.status !== 'live') return `version ${version} retired`;
  const newest = newestWhole(state, instanceId);
  if (newest !== undefined && newest > version) return `superseded by version ${newest}`;
  if (!holdsWhole(state, instanceId, version)) return `no longer holds version ${version} whole (a bucket failed its checksum, or its agent restarted)`;
  return null;
}
