import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { AssignerProtocol, Cluster, logLevel } from 'kafkajs';
import { encodeMemberTag, isDeadPredecessor, MemberTag, memberTagOf, pidAlive, taggedRoundRobin } from './member-identity';

describe('member identity: telling a dead predecessor from a live replica', () => {
  const self: MemberTag = { host: 'node-a', pid: 4242, incarnation: 'now' };
  const alive = new Set([4242, 777]);
  const isAlive = (pid: number) => alive.has(pid);

  it.each<[string, boolean, MemberTag | null]>([
    ['an untagged member (another client, an older version)', false, null],
    ['this process itself (several subscriptions share a group)', false, { ...self }],
    ['a member on another host, whatever its pid', false, { host: 'node-b', pid: 1, incarnation: 'old' }],
    ['a live process of this host (a replica)', false, { host: 'node-a', pid: 777, incarnation: 'other' }],
    ['a process of this host that no longer runs', true, { host: 'node-a', pid: 31337, incarnation: 'old' }],
    ['an earlier incarnation with our pid (a restarted container)', true, { host: 'node-a', pid: 4242, incarnation: 'old' }],
  ])('%s → evict: %s', (_, expected, tag) => {
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

  it('takes a killed process that nobody reaped yet (a zombie) for dead', async () => {
    if (process.platform !== 'linux') return;
    // A child killed while this process blocks its event loop: the kernel keeps it as a zombie until Node reaps it.
    const child = spawn('sleep', ['30']);
    await new Promise((resolve) => child.once('spawn', resolve));
    const pid = child.pid!;
    expect(pidAlive(pid)).toBe(true);
    execFileSync('kill', ['-9', String(pid)]);
    // Until the event loop turns, Node does not call waitpid: once the kernel has it exited, it is a zombie.
    const state = () => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    };
    const deadline = Date.now() + 2_000;
    while (state() !== 'Z' && Date.now() < deadline); // synchronous on purpose: no event-loop turn, no reaping
    expect(state()).toBe('Z');
    expect(pidAlive(pid)).toBe(false);
    await new Promise((resolve) => child.once('exit', resolve));
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
