import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { AssignerProtocol, Cluster, PartitionAssigner, PartitionAssigners } from 'kafkajs';

/**
 * Who a consumer-group member is, beyond its member id: the host and process it runs in, and the
 * incarnation of that process (random per process start). Carried in the member's protocol metadata
 * (the `userData` of the consumer protocol, which every member's metadata has room for and the
 * round-robin assignment ignores), so anyone describing the group can read it.
 *
 * kafkajs 2.x has no static membership (`group.instance.id`): a process killed with kill -9 leaves its
 * member in the group until its session times out, and the next member to join waits for it up to the
 * rebalance timeout. With this tag a restarted process can tell its dead predecessor — same host, a
 * process that no longer runs — from a live replica, and remove the former before joining
 * (predecessor-eviction.ts).
 */
export interface MemberTag {
  host: string;
  pid: number;
  incarnation: string;
}

/** This process, as it tags every member it creates. */
export const THIS_PROCESS: MemberTag = { host: hostname(), pid: process.pid, incarnation: randomUUID() };

/** Marks our tags among whatever else a member's userData may hold (other clients' assigners). */
const TAG_VERSION = 'robustrl-member/1';

export function encodeMemberTag(tag: MemberTag): Buffer {
  return Buffer.from(JSON.stringify({ v: TAG_VERSION, ...tag }), 'utf8');
}

/** The tag in a member's consumer-protocol metadata; null for members that carry none (other clients, older versions). */
export function memberTagOf(memberMetadata: Buffer | null | undefined): MemberTag | null {
  if (!memberMetadata || memberMetadata.length === 0) return null;
  try {
    const { userData } = AssignerProtocol.MemberMetadata.decode(memberMetadata) ?? {};
    if (!userData || userData.length === 0) return null;
    const parsed = JSON.parse(userData.toString('utf8')) as Partial<MemberTag> & { v?: unknown };
    if (parsed.v !== TAG_VERSION || typeof parsed.host !== 'string' || typeof parsed.pid !== 'number' || typeof parsed.incarnation !== 'string') return null;
    return { host: parsed.host, pid: parsed.pid, incarnation: parsed.incarnation };
  } catch {
    return null;
  }
}

/**
 * Whether a member with this tag is a dead earlier incarnation of a process on our host, safe to remove
 * from the group. Only members of this host qualify: a process elsewhere cannot be checked, so it is left
 * to its session timeout. Never this process's own members (several subscriptions may share a group).
 * The same pid as ours from another incarnation is a predecessor (a restarted container's process gets
 * the pid its predecessor had); another pid qualifies only once no process has it.
 */
export function isDeadPredecessor(tag: MemberTag | null, self: MemberTag, pidAlive: (pid: number) => boolean): boolean {
  if (tag === null || tag.host !== self.host || tag.incarnation === self.incarnation) return false;
  return tag.pid === self.pid || !pidAlive(tag.pid);
}

/**
 * Whether a process with this pid runs here (EPERM: it does, owned by someone else). A zombie — killed,
 * not yet reaped by a parent that does not wait — still answers signal 0 but will never heartbeat again:
 * on Linux its state in /proc says so.
 */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !isZombie(pid);
}

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state …": comm may hold spaces and parentheses, so the state follows the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    return false; // no /proc (not Linux), or the process just went: signal 0 said it was there
  }
}

/**
 * kafkajs's round-robin assigner with our tag in the member metadata. The protocol keeps its name, so
 * members of older versions (plain round-robin) still agree on it with ours during a rolling upgrade.
 * kafkajs hands an assigner the consumer's cluster when it creates the consumer; `seeCluster` receives
 * it, which is how the eviction reaches the group coordinator over the consumer's own connections.
 */
export function taggedRoundRobin(
  tag: MemberTag,
  seeCluster: (cluster: Cluster) => void = () => undefined,
  partitions?: (partition: number) => boolean,
): PartitionAssigner {
  return (config) => {
    seeCluster(config.cluster);
    // A sharded group is handed only its shard's partitions: the round robin sees a cluster whose
    // topics have no others, so no member of this group ever fetches them.
    const base = PartitionAssigners.roundRobin(partitions ? { ...config, cluster: onlyPartitions(config.cluster, partitions) } : config);
    return {
      ...base,
      // kafkajs calls assign on this object; the round-robin assign reads `this.version`, which the spread keeps.
      protocol: ({ topics }) => ({
        name: base.name,
        metadata: AssignerProtocol.MemberMetadata.encode({ version: base.version, topics, userData: encodeMemberTag(tag) }),
      }),
    };
  };
}

/** The cluster as an assigner reads it, with each topic's partitions filtered (the rest of it unchanged). */
function onlyPartitions(cluster: Cluster, partitions: (partition: number) => boolean): Cluster {
  const filtered = Object.create(cluster) as Cluster;
  filtered.findTopicPartitionMetadata = (topic: string) => cluster.findTopicPartitionMetadata(topic).filter((m) => partitions(m.partitionId));
  return filtered;
}
