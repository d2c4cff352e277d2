// The registry's derived index (what it is and how it is kept: below); rebuilt and kept current by registry-reindex.ts.

/**
 * What the registry derives from its facts so that deciding on one message costs what the message
 * touches, not the job (before it, every pull completion re-checked every rollout, relay and
 * pull, and scheduling compared every holder of a bucket). Each member answers one question a decision
 * step used to scan the state for:
 *
 *  - `live`, `rollouts`: the live versions (ascending) and the live weight rollouts (code-unit order,
 *    the order joins and pullers are visited in);
 *  - `whole`, `wholeCount`, `newestWholeCount`: which live versions each live rollout holds whole, how
 *    many hold each, whose newest each is (relay joins, the trainer's release, abandonment, retention);
 *  - `unjoined`, `staleRelays`: rollouts whose newest whole version has no relay yet, relays that no
 *    longer serve (RelaySet.joins / leaves);
 *  - `holders`, `idleHolders`, `idleTrainers`: who may serve a (shard, bucket), and of those who serves
 *    nothing now, in id order (the scheduler's least busy candidate, found without comparing every holder);
 *  - pulls by puller, source machine and version, each source's load (`busy`), what is being served
 *    and fetched (`serving`, `pending`), and the pulls that must fail (`stalePulls`);
 *  - `incompleteBy`: live rollouts missing the newest version, by their pulls in flight (pullers with
 *    room in their window).
 *
 * Derived only: left out of snapshots, rebuilt by `rebuildRegistryIndex`; an event that changes a
 * machine of a trainer source or a version (rare: publications, retirements, trainer faults) rebuilds
 * it, the frequent ones (pulls, relays, holdings) update it through `refreshInstance` and `addPull` /
 * `removePull`. `weight-registry-index.spec.ts` holds it to a rebuild after every event of random runs.
 */
export class RegistryIndex {
  live: number[] = [];
  rollouts: string[] = [];
  readonly rolloutSet = new Set<string>();
  readonly whole = new Map<string, number[]>();
  readonly wholeCount = new Map<number, number>();
  readonly newestWholeCount = new Map<number, number>();
  readonly unjoined = new Set<string>();
  readonly relaysOf = new Map<string, Set<string>>();
  readonly staleRelays = new Set<string>();
  /** `version/shard/bucket` → live rollouts holding it; `heldKeys`: the keys each is listed under. */
  readonly holders = new Map<string, Set<string>>();
  readonly heldKeys = new Map<string, string[]>();
  /** `version/shard/bucket` → holders serving nothing now, in the scheduler's id order. */
  readonly idleHolders = new Map<string, string[]>();
  /** `version/shard` of a live version → the shard's trainer sources (id → address, the first its publication names). */
  readonly sourceAddress = new Map<string, Map<string, string>>();
  /** trainer source → the `version/shard`s of live versions naming it; `sourceMachines`: the machines they run on. */
  readonly sourceShards = new Map<string, string[]>();
  readonly sourceMachines = new Set<string>();
  /** `version/shard` → its trainer sources on machines not down serving nothing now, in id order. */
  readonly idleTrainers = new Map<string, string[]>();
  readonly pullsOfPuller = new Map<string, Set<string>>();
  readonly pullsOfSourceMachine = new Map<string, Set<string>>();
  readonly pullsOfVersion = new Map<number, Set<string>>();
  readonly busy = new Map<string, number>();
  readonly serving = new Map<string, number>();
  readonly pending = new Map<string, number>();
  readonly stalePulls = new Set<string>();
  readonly incomplete = new Map<string, number>();
  readonly incompleteBy = new Map<number, Set<string>>();
}

/** One publisher's part of a live version: trainer sources are per shard (each rank serves its own). */
export const shardKey = (version: number, shard: number) => `${version}/${shard}`;
export const holderKey = (version: number, shard: number, bucketIndex: number) => `${version}/${shard}/${bucketIndex}`;
export const servingKey = (sourceId: string, version: number, shard: number, bucketIndex: number) => `${sourceId}|${version}|${shard}|${bucketIndex}`;
export const pendingKey = (version: number, shard: number, bucketIndex: number, pullerId: string) => `${version}/${shard}/${bucketIndex}/${pullerId}`;
