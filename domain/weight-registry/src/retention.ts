import { draft } from '@robustrl/contracts';
import { WeightRegistryDraft, WeightRegistryState } from './weight-registry.state';

export const DEFAULT_RETAINED_VERSIONS = 2;

/**
 * Retention: the newest `keep` live versions stay; an older one is retired only when no living rollout
 * still needs it — no pull of it in flight, and no living rollout whose newest whole version (the one it
 * serves inference with, and relays) it is. A rollout still pulling a newer version keeps its current
 * one alive, so a slow or recovering rollout is never left without weights. (Counted by the index.)
 */
export function retirements(state: WeightRegistryState, keep: number): WeightRegistryDraft[] {
  const ix = state.index;
  const older = ix.live.slice(0, Math.max(0, ix.live.length - keep));
  return older.filter((v) => !ix.newestWholeCount.has(v) && !ix.pullsOfVersion.has(v)).map((version) => draft('WeightVersionRetired', { version }));
}
