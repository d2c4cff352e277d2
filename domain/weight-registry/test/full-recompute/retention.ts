import { draft } from '@robustrl/contracts';
import { liveRollouts, liveVersions, newestWhole, WeightRegistryDraft, WeightRegistryState } from './weight-registry.state';

/**
 * Retention: the newest `keep` live versions stay; an older one is retired only when no living rollout
 * still needs it — no pull of it in flight, and no living rollout whose newest whole version (the one it
 * serves inference with, and relays) it is. A rollout still pulling a newer version keeps its current
 * one alive, so a slow or recovering rollout is never left without weights.
 */
export function retirements(state: WeightRegistryState, keep: number): WeightRegistryDraft[] {
  const live = liveVersions(state);
  const older = live.slice(0, Math.max(0, live.length - keep));
  if (older.length === 0) return [];
  const inUse = new Set<number>();
  for (const r of liveRollouts(state)) {
    const v = newestWhole(state, r);
    if (v !== undefined) inUse.add(v);
  }
  for (const p of Object.values(state.pulls)) inUse.add(p.version);
  return older.filter((v) => !inUse.has(v)).map((version) => draft('WeightVersionRetired', { version }));
}
