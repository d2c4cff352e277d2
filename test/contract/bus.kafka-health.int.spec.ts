import { randomUUID } from 'node:crypto';
import { createMessage, Topics } from '@robustrl/contracts';
import { KafkaBus } from '@robustrl/bus';
import { eventually } from '@robustrl/testing/eventually';

/** Readiness of the Kafka adapter: the broker reachable or not, each consumer's lag from the broker's offsets. */
describe('Kafka bus health', () => {
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

  it('reports an unreachable broker within seconds, without throwing', async () => {
    const bus = new KafkaBus({ brokers: ['127.0.0.1:1'], clientId: 'health-test', logger: quiet, ensureTopics: false });
    const started = Date.now();
    const health = await bus.health();
    expect(health.reachable).toBe(false);
    expect(health.error).toBeTruthy();
    expect(Date.now() - started).toBeLessThan(10_000);
    await bus.close();
  });

  it('reports a reachable broker and each subscription running with its lag, which drops to 0 once consumed', async () => {
    const brokers = process.env.KAFKA_BROKERS!.split(',');
    const bus = new KafkaBus({ brokers, clientId: 'health-test', topicPrefix: `test-${randomUUID()}.`, logger: quiet });
    const jobId = `job-${randomUUID()}`;
    const step = (n: number) =>
      createMessage('TrainingStepCompleted', { step: n, batchId: `b${n}`, durationMs: 1 }, { jobId, source: 'test', occurredAt: new Date().toISOString() });
    await bus.publish([step(1), step(2), step(3)]);
    const groupId = `health-${randomUUID()}`;
    let handled = 0;
    const sub = await bus.subscribe({ groupId, topics: [Topics.training], handler: async () => void handled++ });
    try {
      await eventually('all three handled', () => (handled === 3 ? true : undefined));
      const health = await eventually('the lag committed down to 0', async () => {
        const h = await bus.health();
        return h.subscriptions[0]?.lag === 0 ? h : undefined;
      });
      expect(health).toMatchObject({ reachable: true, subscriptions: [{ groupId, running: true, lag: 0 }] });
    } finally {
      await sub.close();
      await bus.close();
    }
  });
});
