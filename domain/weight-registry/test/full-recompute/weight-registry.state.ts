/**
 * The registry as it was before the index: every decision recomputed from the whole state, every fold a
 * new state. The reference the indexed registry is held to (`weight-registry-index.spec.ts`), spec code
 * only. Its state is the live registry's facts (`RegistryData`) without the derived index; the records
 * and readers of the facts, the decider's options and defaults, the publication authority, the folds of
 * publications and trainer faults (`../../shard-publication.ts`, shared so that both fold the shard
 * dimension of named, sharded versions alike: docs/integrators/weights.md) and the drafts of failed pulls
 * are the live ones. What it keeps of its own is what differs: the copying fold (weight-registry.evolve.ts)
 * and the steps that recompute from the whole state what the live ones read from the index (relay-set.ts,
 * releases.ts, pull-failures.ts, retention.ts, pull-scheduler.ts).
 */
export * from '../../src/weight-registry.state';
import { initialRegistryData, RegistryData } from '../../src/weight-registry.state';
export type WeightRegistryState = RegistryData;
export const initialWeightRegistryState = initialRegistryData;
