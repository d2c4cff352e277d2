import { SHARD, SHARD_COUNT, SHARD_LAYOUT_CHANGE } from './service-settings';
import { hostname as osHostname } from 'node:os';

/**
 * A static shard of a deciding service (docs/contributors/snapshots.md "Sharding the detector"): shard `index` of `count` decides
 * the jobs whose records are on the partitions p with p mod count = index, of every topic it reads.
 * Every topic has as many partitions and records are keyed by job id, so a job is in one shard on every
 * topic: its state, windows and decisions live in one process, and shards share nothing but the broker
 * and the database (each has its own consumer group, checkpoints, inbox, snapshots and outbox).
 *
 * Static rather than rebalanced: a shard that dies is restarted (by its Deployment or StatefulSet, in
 * about a second with snapshots) instead of its jobs moving to a live shard, so a job's state never has
 * to be handed over between processes while they run.
 */
export interface PartitionShard {
  readonly index: number;
  readonly count: number;
}

export const UNSHARDED: PartitionShard = { index: 0, count: 1 };

/** Whether the shard decides the records of this partition. */
export const ownsPartition = (shard: PartitionShard, partition: number): boolean => partition % shard.count === shard.index;

/**
 * The name a shard's consumer group and store rows go by: the consumer's own when unsharded (a
 * deployment that never sharded keeps every row it has), else `<consumer>.shard-<index>-of-<count>`.
 */
export const shardName = (consumer: string, shard: PartitionShard): string =>
  shard.count === 1 ? consumer : `${consumer}.shard-${shard.index}-of-${shard.count}`;

/** The layout (shard count) a store name belongs to, if it is one of this consumer's names; else null. */
export function layoutOf(consumer: string, name: string): number | null {
  if (name === consumer) return 1;
  const m = new RegExp(`^${escapeRegExp(consumer)}\\.shard-(\\d+)-of-(\\d+)$`).exec(name);
  return m ? Number(m[2]) : null;
}

/**
 * `ROBUSTRL_SHARD`: `<index>/<count>` (e.g. `1/4`), unset for one shard. A StatefulSet can pass its pod
 * ordinal as the index with `ROBUSTRL_SHARD_COUNT` and no index (`ROBUSTRL_SHARD=auto`: the index is
 * the number at the end of the hostname, `robustrl-detector-2` → 2). A bad value stops start-up with
 * a message naming it.
 */
export function shardFromEnv(env: NodeJS.ProcessEnv = process.env, hostname = (): string => env.HOSTNAME ?? osHostname()): PartitionShard {
  const raw = SHARD.read(env);
  if (raw === undefined) return UNSHARDED;
  if (raw === 'auto') {
    const count = SHARD_COUNT.read(env);
    if (count === undefined) throw new Error("ROBUSTRL_SHARD_COUNT (needed by ROBUSTRL_SHARD=auto) must be a positive integer, got ''");
    const ordinal = /-(\d+)$/.exec(hostname());
    if (!ordinal) throw new Error(`ROBUSTRL_SHARD=auto takes the shard index from a hostname ending in -<ordinal> (a StatefulSet pod's), got '${hostname()}'`);
    return checked(Number(ordinal[1]), count, `ROBUSTRL_SHARD=auto (hostname '${hostname()}')`);
  }
  const [index, count] = raw.split('/').map(Number);
  return checked(index!, count!, `ROBUSTRL_SHARD=${raw}`);
}

/** `ROBUSTRL_SHARD_LAYOUT_CHANGE`: `replay` to start a new shard count over the topics' retention (see DecidingConsumerSpec). */
export function shardLayoutChangeFromEnv(env: NodeJS.ProcessEnv = process.env): 'refuse' | 'replay' {
  return SHARD_LAYOUT_CHANGE.read(env);
}

function checked(index: number, count: number, what: string): PartitionShard {
  if (!Number.isSafeInteger(count) || count < 1) throw new Error(`${what}: the shard count must be at least 1`);
  if (!Number.isSafeInteger(index) || index >= count) throw new Error(`${what}: the shard index must be from 0 to ${count - 1}`);
  return { index, count };
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
