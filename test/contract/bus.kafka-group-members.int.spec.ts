import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaBus, memberTagOf } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { eventually } from '@robustrl/testing/eventually';

/**
 * Several replicas of a service in one consumer group, on one host, each its own process: starting a
 * replica removes from the group only members whose process is dead (kill -9), never a live replica's —
 * and a replica restarted after kill -9 is back in the group, beside the live one, within seconds.
 */
describe('Kafka group members across processes', () => {
  const brokers = process.env.KAFKA_BROKERS!.split(',');
  const topicPrefix = `test-${randomUUID()}.`;
  const groupId = `replicas-${randomUUID()}`;
  const warnings: string[] = [];
  const bus = new KafkaBus({
    brokers,
    clientId: 'replica-b',
    topicPrefix,
    logger: { info: () => undefined, warn: (m) => warnings.push(m), error: () => undefined },
  });
  const admin = new Kafka({ brokers, clientId: 'members-test', logLevel: logLevel.NOTHING }).admin();
  const children: ChildProcess[] = [];

  const replica = async () => {
    const child = spawn(process.execPath, [join(__dirname, 'group-member.js'), groupId], {
      env: { ...process.env, ROBUSTRL_TOPIC_PREFIX: topicPrefix },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    const lines: Array<Record<string, unknown>> = [];
    child.stdout!.on('data', (b: Buffer) =>
      lines.push(
        ...b
          .toString()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Record<string, unknown>),
      ),
    );
    const subscribed = await eventually('the replica subscribed', () => lines.find((l) => l.subscribed), 30_000);
    return { child, lines, ms: subscribed.ms as number };
  };
  /** Member pids of the group once it is stable (metadata is described only then). */
  const memberPids = async () => {
    const [group] = (await admin.describeGroups([topicPrefix + groupId])).groups;
    if (group.state !== 'Stable') return undefined;
    return group.members.map((m) => memberTagOf(m.memberMetadata)?.pid).sort();
  };

  beforeAll(async () => {
    await bus.ensureTopics();
    await admin.connect();
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await admin.disconnect();
    await bus.close();
  });

  it('leaves a live replica of this host in the group, removes a dead one, and the restarted replica rejoins within seconds', async () => {
    const a = await replica();
    // This process joins as a second replica: replica A's process runs, so its member must stay.
    const sub = await bus.subscribe({ groupId, topics: [Topics.training], handler: async () => undefined });
    await eventually('both replicas members', async () => ((await memberPids())?.length === 2 ? true : undefined), 20_000);
    expect(await memberPids()).toEqual([a.child.pid, process.pid].sort());
    expect(warnings.filter((w) => w.startsWith('removed the member'))).toEqual([]);

    a.child.kill('SIGKILL');
    await new Promise((resolve) => a.child.once('exit', resolve));
    const c = await replica();
    // C removed A's member (its process is gone) and joined; the live replica (this process) rejoined.
    expect(c.lines.filter((l) => String(l.warn).startsWith('removed the member'))).toMatchObject([{ pid: a.child.pid }]);
    expect(c.ms).toBeLessThan(5_000);
    process.stdout.write(`replica restarted after kill -9 beside a live one: subscribed in ${c.ms} ms\n`);
    await eventually('C and this process the members', async () => {
      const pids = await memberPids();
      return pids && pids.join() === [c.child.pid, process.pid].sort().join() ? true : undefined;
    });
    await sub.close();
  }, 90_000);
});
