import { RegistryData, WeightVersion } from './weight-registry.state';

/** A version as snapshots held it before shards: one publisher's buckets and sources on the version itself. */
interface UnshardedVersion extends Omit<WeightVersion, 'count' | 'shards'> {
  buckets: WeightVersion['shards'][number]['buckets'];
  sources: WeightVersion['shards'][number]['sources'];
  trainerServing: boolean;
  publishedAt: number;
  publicationId: string;
}

/**
 * The facts of a snapshot in today's shape (docs/contributors/snapshots.md: a restarted registry reads
 * its last snapshot). A snapshot written before versions were sharded holds every version as one
 * publisher's, holdings and attempt counters per bucket: that is shard 0 of a version of one shard.
 * A snapshot from before publication authority holds no pending publications. Idempotent: a snapshot
 * already in today's shape comes back as it was.
 */
export function upgradeRegistryData(data: RegistryData): RegistryData {
  const versions: RegistryData['versions'] = {};
  for (const [key, raw] of Object.entries(data.versions as Record<string, WeightVersion | UnshardedVersion>)) {
    if ('shards' in raw) {
      versions[Number(key)] = raw;
      continue;
    }
    const { buckets, sources, trainerServing, publishedAt, publicationId, ...rest } = raw;
    versions[Number(key)] = { ...rest, count: 1, shards: { 0: { index: 0, buckets, sources, trainerServing, publishedAt, publicationId } } };
  }
  // Before shards a version's record mapped bucket → pull id (a string), and bucket → attempts (a number).
  const holdings: RegistryData['holdings'] = {};
  for (const [instanceId, byVersion] of Object.entries(data.holdings)) {
    holdings[instanceId] = {};
    for (const [version, held] of Object.entries(byVersion)) holdings[instanceId][Number(version)] = perShard<string>(held, 'string');
  }
  const attempts: RegistryData['attempts'] = {};
  for (const [key, counters] of Object.entries(data.attempts)) attempts[key] = perShard<number>(counters, 'number');
  // Before publication authority nothing was held back.
  return { ...data, versions, holdings, attempts, pendingPublications: data.pendingPublications ?? {} };
}

/** `record` as shard → bucket → leaf: already so, or (leaves directly under it) shard 0's. */
function perShard<T>(record: object, leaf: 'string' | 'number'): Record<number, Record<number, T>> {
  const values = Object.values(record);
  return values.length > 0 && values.every((x) => typeof x === leaf) ? { 0: record as Record<number, T> } : (record as Record<number, Record<number, T>>);
}
