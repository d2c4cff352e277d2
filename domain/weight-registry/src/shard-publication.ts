import { DataOf, publicationDigest, SINGLE_SHARD } from '@robustrl/contracts';
import { RegistryData, shardOf, WeightShard, WeightVersion } from './weight-registry.state';

/**
 * Publications of a named, sharded version (DESIGN "Weights are named and sharded", docs/integrators/weights.md):
 * each trainer rank publishes its own shard — its buckets, its weight server — and a version is whole
 * once every one of its `count` shards is. Folded as a function of the facts (a new record where one
 * changes, never a write into one the state shares), so the in-place evolve and the full recomputation
 * the index is held to (`domain/weight-registry/test/full-recompute/`) fold publications alike; both rebuild what they derive after.
 *
 *  - A version not live (new, or republished after it was abandoned or retired) starts from nothing with
 *    this shard: every copy of it is dropped (paper §5.2.2, "rollouts wait for the trainer to recover
 *    before re-initiating the weight pull").
 *  - Another shard of a live version is ADDED: pullers may pull it at once, without waiting for the rest.
 *  - The same shard again (a restarted rank re-publishing): the same content refreshes its sources and
 *    serving (the rank's new address; copies of it are kept, they are as good as the rank's). Different
 *    content replaces the shard: what anyone held or was pulling of THAT shard is dropped — the other
 *    shards are not touched.
 *  - The same event again (redelivery) changes nothing.
 *  - A different shard count under a live number is another layout of a version that already exists
 *    (a trainer recovered with another world size): ignored, the version's copies stay good.
 */
export function foldPublication(data: RegistryData, d: DataOf<'WeightVersionPublished'>, at: number, publicationId: string): RegistryData {
  const ref = d.shard ?? SINGLE_SHARD;
  const shard: WeightShard = {
    index: ref.index,
    buckets: [...d.buckets].sort((a, b) => a.index - b.index),
    sources: d.sources,
    trainerServing: true,
    publishedAt: at,
    publicationId,
    digest: publicationDigest(d),
  };
  const existing = data.versions[d.version];
  // Redelivered: this very publication is what the shard holds (live or retired since).
  if (existing?.shards[ref.index]?.publicationId === publicationId) return data;
  if (!existing || existing.status !== 'live') {
    const fresh: WeightVersion = {
      version: d.version,
      step: d.step,
      count: ref.count,
      shards: { [ref.index]: shard },
      status: 'live',
      trainerReleased: false,
      releaseAnnounced: false,
      unreachable: [],
    };
    return dropCopies({ ...data, versions: { ...data.versions, [d.version]: fresh } }, d.version);
  }
  if (existing.count !== ref.count) return data;
  const old = existing.shards[ref.index];
  // The publisher's new incarnation is reachable until a puller says otherwise (paper §5.2.2).
  const republished = new Set([...(old?.sources ?? []), ...d.sources].map((s) => s.instanceId));
  const unreachable = existing.unreachable.filter((id) => !republished.has(id));
  const next: WeightVersion = { ...existing, shards: { ...existing.shards, [ref.index]: shard }, unreachable };
  const versions = { ...data.versions, [d.version]: next };
  if (!old || sameContent(old.buckets, shard.buckets)) return { ...data, versions };
  return dropCopies({ ...data, versions }, d.version, ref.index);
}

/**
 * A trainer fault restarts the whole trainer group (paper §5.1.2): no rank serves any shard published
 * before the fault. A shard published after it (the recovered rank's) is unaffected, which also makes a
 * redelivered old verdict harmless.
 */
export function foldTrainerFault(data: RegistryData, at: number): RegistryData {
  let versions: RegistryData['versions'] | undefined;
  for (const v of Object.values(data.versions)) {
    let shards: WeightVersion['shards'] | undefined;
    for (const shard of Object.values(v.shards)) {
      if (!shard.trainerServing || shard.publishedAt > at) continue;
      (shards ??= { ...v.shards })[shard.index] = { ...shard, trainerServing: false };
    }
    if (shards) (versions ??= { ...data.versions })[v.version] = { ...v, shards };
  }
  return versions ? { ...data, versions } : data;
}

/**
 * Forgets every holding, pull and relay of one version, or of one of its shards (the relays follow from
 * the holdings then: RelaySet.leaves). The decider has already failed the pulls of an abandoned or
 * retired version; the pulls of a replaced shard fetch content nobody publishes any more — their agents
 * verify against the new manifest, and the registry no longer waits for them.
 */
export function dropCopies(data: RegistryData, version: number, shard?: number): RegistryData {
  const holdings: RegistryData['holdings'] = {};
  for (const [instanceId, versions] of Object.entries(data.holdings)) {
    const rest = { ...versions };
    if (shard === undefined) delete rest[version];
    else if (rest[version]?.[shard] !== undefined) {
      const shards = { ...rest[version] };
      delete shards[shard];
      rest[version] = shards;
    }
    holdings[instanceId] = rest;
  }
  const gone = (p: { version: number; shard?: number }) => p.version === version && (shard === undefined || shardOf(p) === shard);
  const pulls = Object.fromEntries(Object.entries(data.pulls).filter(([, p]) => !gone(p)));
  const relays = shard === undefined ? Object.fromEntries(Object.entries(data.relays).filter(([, r]) => r.version !== version)) : data.relays;
  return { ...data, holdings, pulls, relays };
}

const sameContent = (
  a: readonly { index: number; sizeBytes: number; checksum: string }[],
  b: readonly { index: number; sizeBytes: number; checksum: string }[],
) => a.length === b.length && a.every((x, i) => x.index === b[i].index && x.sizeBytes === b[i].sizeBytes && x.checksum === b[i].checksum);
