import { AssignerProtocol, Cluster, logLevel } from 'kafkajs';
import { encodeMemberTag, isDeadPredecessor, MemberTag, memberTagOf, pidAlive, taggedRoundRobin } from './member-identity';

describe('member identity: telling a dead predecessor from a live replica', () => {
  const self: MemberTag = { host: 'node-a', pid: 4242, incarnation: 'now' };
  const alive = new Set([4242, 777]);
  const isAlive = (pid: number) => alive.has(pid);

  it.each<[string, MemberTag | null, boolean]>([
    ['an untagged member (another client, an older version)', null, false],
    ['this process itself (several subscriptions share a group)', { ...self }, false],
    ['a member on another host, whatever its pid', { host: 'node-b', pid: 1, incarnation: 'old' }, false],
    ['a live process of this host (a replica)', { host: 'node-a', pid: 777, incarnation: 'other' }, false],
    ['a process of this host that no longer runs', { host: 'node-a', pid: 31337, incarnation: 'old' }, true],
    ['an earlier incarnation with our pid (a restarted container)', { host: 'node-a', pid: 4242, incarnation: 'old' }, true],
  ])('%s → evict: %s', (_, tag, expected) => {
    expect(isDeadPredecessor(tag, self, isAlive)).toBe(expected);
  });

  it('round-trips the tag through the consumer-protocol metadata the assigner announces', () => {
    const assigner = taggedRoundRobin(self)({ cluster: {} as Cluster, groupId: 'g', logger: quietLogger });
    const { name, metadata } = assigner.protocol({ topics: ['t1', 't2'] });
    expect(name).toBe('RoundRobinAssigner'); // the name plain kafkajs members announce: mixed groups agree on it
    expect(AssignerProtocol.MemberMetadata.decode(metadata)).toMatchObject({ version: 0, topics: ['t1', 't2'] });
    expect(memberTagOf(metadata)).toEqual(self);
  });

  it('reads no tag from metadata without one, or with userData of another kind', () => {
    const plain = AssignerProtocol.MemberMetadata.encode({ version: 0, topics: ['t'], userData: Buffer.alloc(0) });
    const foreign = AssignerProtocol.MemberMetadata.encode({ version: 0, topics: ['t'], userData: Buffer.from('{"rack":"r1"}') });
    const garbage = AssignerProtocol.MemberMetadata.encode({ version: 0, topics: ['t'], userData: Buffer.from([0xff, 0x00, 0x12]) });
    expect(memberTagOf(plain)).toBeNull();
    expect(memberTagOf(foreign)).toBeNull();
    expect(memberTagOf(garbage)).toBeNull();
    expect(memberTagOf(Buffer.alloc(0))).toBeNull();
    expect(memberTagOf(Buffer.from([1, 2]))).toBeNull();
    expect(memberTagOf(encodeMemberTag(self))).toBeNull(); // the bare tag is not a member's metadata
  });

  it('hands the consumer’s cluster to whoever needs the coordinator', () => {
    const cluster = { isConnected: () => true } as unknown as Cluster;
    let seen: Cluster | undefined;
    taggedRoundRobin(self, (c) => (seen = c))({ cluster, groupId: 'g', logger: quietLogger });
    expect(seen).toBe(cluster);
  });

  it('checks a pid against the processes of this host', () => {
    expect(pidAlive(process.pid)).toBe(true);
    expect(pidAlive(2 ** 22 + 17)).toBe(false); // above Linux's pid_max ceiling
  });
});

const quietLogger = {
  info: () => undefined,
  error: () => undefined,
  warn: () => undefined,
  debug: () => undefined,
  namespace: () => quietLogger,
  setLogLevel: (_: logLevel) => undefined,
};
