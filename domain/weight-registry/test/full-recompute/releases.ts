import { draft } from '@robustrl/contracts';
import { WeightRegistryDraft, WeightRegistryState } from './weight-registry.state';

/**
 * TrainerReleased, once per version, when the trainer no longer has to serve it (paper §5.2.1): in async
 * mode at the version's first RelayJoined, so the trainer resumes training; in sync and semi-sync once
 * every living rollout holds it whole. The flag itself is set where the relay joins (evolve); this step
 * turns it into the event the trainer's agent waits for.
 */
export function releases(state: WeightRegistryState): WeightRegistryDraft[] {
  return Object.values(state.versions)
    .filter((v) => v.status === 'live' && v.trainerReleased && !v.releaseAnnounced)
    .sort((a, b) => a.version - b.version)
    .map((v) => draft('TrainerReleased', { version: v.version, step: v.step, reason: state.mode === 'async' ? 'first-relay' : 'all-rollouts-hold' }));
}
