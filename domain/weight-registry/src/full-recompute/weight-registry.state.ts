/**
 * The registry as it was before the index: every decision recomputed from the whole state,
 * every fold a new state. Kept, out of the build, as the reference the indexed registry is held to
 * (`weight-registry-index.spec.ts`): these files are the previous implementation, unchanged but for
 * this module, which gives them the facts without the derived index, and the shard dimension of named,
 * sharded versions (docs/integrators/weights.md), added the plain way — publications and trainer faults folded by
 * the same functions as the indexed registry (`../shard-publication.ts`).
 */
export * from '../weight-registry.state';
import { initialRegistryData, RegistryData } from '../weight-registry.state';
export type WeightRegistryState = RegistryData;
export const initialWeightRegistryState = initialRegistryData;
