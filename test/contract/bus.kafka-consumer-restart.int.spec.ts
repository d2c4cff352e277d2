import { randomUUID } from 'node:crypto';
import { Assigner, Cluster, Consumer, Kafka, logLevel } from 'kafkajs';
import { createMessage, Topics } from '@robustrl/contracts';
import { KafkaBus } from '@robustrl/bus';
import { eventually } from '@robustrl/testing/eventually';

/**
 * A consumer kafkajs stops for good (CRASH with `restart: false`) is restarted by the bus, in the same
 * group, from the committed offsets — not left dead with readiness red until someone restarts the process.
 *
 * The non-retriable error is a real one from the broker: while our member is out of the group (removed,
 * as a dead member would be), a consumer of another client with an incompatible partition assignor takes
 * the group; our consumer's rejoin is refused with INCONSISTENT_GROUP_PROTOCOL, which kafkajs does not
 * retry. Once that consumer leaves, ours must come back by itself and go on consuming.
 */
describe('Kafka consumer stopped by a non-retriable error', () => {
  const brokers = process.env.KAFKA_BROKERS!.split(',');
  const topicPrefix = `test-${randomUUID()}.`;
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

  it('is restarted by the bus with backoff, counted, reported not running meanwhile, and consumes on', async () => {
    const bus = new KafkaBus({ brokers, clientId: 'restart-test', topicPrefix, logger: quiet, consumerRestart: { initialDelayMs: 200, maxDelayMs: 1_000 } });
    const jobId = `job-${randomUUID()}`;
    const groupId = `restart-${randomUUID()}`;
    const step = (n: number) =>
      createMessage('TrainingStepCompleted', { step: n, batchId: `b${n}`, durationMs: 1 }, { jobId, source: 'test', occurredAt: new Date().toISOString() });
    const handled: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let intruder: Consumer | undefined;
    const sub = await bus.subscribe({
      groupId,
      topics: [Topics.training],
      handler: async (d) => {
        if (d.message.type !== 'TrainingStepCompleted' || d.message.jobId !== jobId) return;
        handled.push(d.message.data.step);
        // Step 2 holds our consumer inside its batch while the group is taken from it.
        if (d.message.data.step === 2 && handled.filter((s) => s === 2).length === 1) await gate;
      },
    });
    try {
      await bus.publish(step(1));
      await eventually('step 1 handled', () => (handled.includes(1) ? true : undefined));
      expect((await bus.health()).subscriptions).toMatchObject([{ groupId, running: true, restarts: 0 }]);

      await bus.publish(step(2));
      await eventually('step 2 in its handler', () => (handled.includes(2) ? true : undefined));
      const taken = await takeGroup(brokers, topicPrefix + groupId, topicPrefix + Topics.training);
      intruder = taken.intruder;
      release();

      const down = await eventually('our consumer stopped, reported not running', async () => {
        const [s] = (await bus.health()).subscriptions;
        return s && !s.running && s.error ? s : undefined;
      });
      expect(down.error).toMatch(/INCONSISTENT_GROUP_PROTOCOL|incompatible/i);

      await intruder.disconnect();
      intruder = undefined;
      await bus.publish(step(3));
      await eventually('step 3 handled by the restarted consumer', () => (handled.includes(3) ? true : undefined), 30_000);
      const [up] = (await bus.health()).subscriptions;
      expect(up).toMatchObject({ groupId, running: true });
      expect(up.restarts).toBeGreaterThanOrEqual(1);
      expect(up.error).toBeUndefined();
      // Nothing skipped: step 2, whose offset the stopped consumer could not commit, came again before 3.
      expect(handled.filter((s) => s !== 2)).toEqual([1, 3]);
      expect(handled.indexOf(2)).toBeLessThan(handled.indexOf(3));
    } finally {
      release();
      await intruder?.disconnect();
      await sub.close();
      await bus.close();
    }
  }, 60_000);
});

/**
 * Removes the group's current members (with the LeaveGroup a dead member's eviction uses) and joins it at
 * once with a consumer whose only assignor our consumers do not have.
 */
async function takeGroup(brokers: string[], groupId: string, topic: string): Promise<{ intruder: Consumer }> {
  let cluster: Cluster | undefined;
  const incompatible = ({ cluster: c }: { cluster: Cluster }): Assigner => {
    cluster = c;
    return {
      name: 'IncompatibleAssigner',
      version: 0,
      assign: async ({ members }) => members.map((m) => ({ memberId: m.memberId, memberAssignment: Buffer.alloc(0) })),
      protocol: () => ({ name: 'IncompatibleAssigner', metadata: Buffer.alloc(0) }),
    };
  };
  const kafka = new Kafka({ brokers, clientId: 'intruder', logLevel: logLevel.NOTHING });
  const intruder = kafka.consumer({ groupId, partitionAssigners: [incompatible] });
  await intruder.connect();
  await intruder.subscribe({ topics: [topic] });
  const coordinator = (await cluster!.findGroupCoordinator({ groupId })) as unknown as {
    describeGroups(r: { groupIds: string[] }): Promise<{ groups: Array<{ members: Array<{ memberId: string }> }> }>;
    leaveGroup(r: { groupId: string; memberId: string }): Promise<unknown>;
  };
  const { groups } = await coordinator.describeGroups({ groupIds: [groupId] });
  for (const m of groups[0].members) await coordinator.leaveGroup({ groupId, memberId: m.memberId });
  const joined = new Promise<void>((resolve) => intruder.on(intruder.events.GROUP_JOIN, () => resolve()));
  await intruder.run({ eachMessage: async () => undefined });
  await joined;
  return { intruder };
}
