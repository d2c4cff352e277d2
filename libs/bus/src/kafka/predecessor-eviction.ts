import { Broker, Cluster } from 'kafkajs';
import { BusLogger } from '../message-bus';
import { isDeadPredecessor, MemberTag, memberTagOf, pidAlive } from './member-identity';

/** LeaveGroup on the coordinator: kafkajs's broker has it (its own consumers leave through it), its type declarations omit it. */
type Coordinator = Broker & { leaveGroup?: (request: { groupId: string; memberId: string }) => Promise<unknown> };

interface DescribedMember {
  memberId: string;
  memberMetadata?: Buffer;
}

/**
 * Removes from the group, before this process joins it, the members a dead earlier incarnation of a
 * process on this host left behind (member-identity.ts), with the LeaveGroup request their process would
 * have sent had it shut down gracefully. Without this a restart after kill -9 waits in its first join for
 * the dead member — up to the rebalance timeout — and a group whose only member died would sit idle that long.
 *
 * Only dead processes of this host are removed; live replicas and members elsewhere are left to the
 * group protocol. The broker describes member metadata only for a stable group; in any other state
 * there is nothing to identify, and the join waits as before. Returns the member ids removed.
 */
export async function evictDeadPredecessors(
  cluster: Cluster,
  groupId: string,
  self: MemberTag,
  logger: BusLogger,
  alive: (pid: number) => boolean = pidAlive,
): Promise<string[]> {
  const coordinator = (await cluster.findGroupCoordinator({ groupId })) as Coordinator;
  if (typeof coordinator.leaveGroup !== 'function') {
    logger.warn('this kafkajs has no LeaveGroup on its brokers: a dead member of this host is left to its session timeout', { group: groupId });
    return [];
  }
  const described = (await coordinator.describeGroups({ groupIds: [groupId] })) as { groups?: Array<{ members?: DescribedMember[] }> };
  const evicted: string[] = [];
  for (const member of described.groups?.[0]?.members ?? []) {
    const tag = memberTagOf(member.memberMetadata);
    if (!isDeadPredecessor(tag, self, alive)) continue;
    try {
      await coordinator.leaveGroup({ groupId, memberId: member.memberId });
      evicted.push(member.memberId);
      logger.warn('removed the member a dead process of this host left in the group, instead of waiting out its session', {
        group: groupId,
        memberId: member.memberId,
        pid: tag?.pid,
      });
    } catch (err) {
      // Its session expired meanwhile, or another restart removed it first: gone either way.
      if ((err as { type?: string }).type !== 'UNKNOWN_MEMBER_ID') throw err;
    }
  }
  return evicted;
}
