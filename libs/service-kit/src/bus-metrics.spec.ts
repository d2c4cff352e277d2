import { Registry } from 'prom-client';
import { BusHealth, DeadLetterCount, InProcessBus } from '@robustrl/bus';
import { createMessage, Topics } from '@robustrl/contracts';
import { eventually } from '@robustrl/testing/eventually';
import { registerBusMetrics } from './bus-metrics';

/** The value of one series in Prometheus text, or undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('bus metrics', () => {
  const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

  it('shows each consumer group running with its lag, and the dead letters the bus wrote by topic and reason', async () => {
    const bus = new InProcessBus({ logger: quiet });
    const registry = new Registry();
    registerBusMetrics(registry, bus);
    const step = (n: number) =>
      createMessage(
        'TrainingStepCompleted',
        { step: n, batchId: `b${n}`, durationMs: 1 },
        { jobId: 'job-m', source: 'spec', occurredAt: new Date().toISOString() },
      );
    let release!: () => void;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    try {
      await bus.publish([step(1), step(2), step(3)]);
      // A consumer stuck in its first record: nothing committed, all three still lag.
      let entered = false;
      await bus.subscribe({ groupId: 'stuck', topics: [Topics.training], handler: () => ((entered = true), stuck) });
      await bus.subscribe({ groupId: 'telemetry-reader', topics: [Topics.telemetry], handler: async () => undefined });
      await bus.publishRaw({ topic: Topics.telemetry, key: 'job-m', value: 'not json' });
      await bus.publishRaw({ topic: Topics.telemetry, key: 'job-m', value: '{"neither":"an envelope"}' });
      await eventually('the stuck handler entered and both bad records dead-lettered', () =>
        entered && bus.deadLetterCounts().some((c) => c.count === 2) ? true : undefined,
      );

      const text = await registry.metrics();
      expect(sample(text, 'robustrl_bus_reachable')).toBe(1);
      expect(sample(text, 'robustrl_bus_consumer_running{group="stuck"}')).toBe(1);
      expect(sample(text, 'robustrl_bus_consumer_lag{group="stuck"}')).toBe(3);
      expect(sample(text, 'robustrl_bus_consumer_lag{group="telemetry-reader"}')).toBe(0);
      expect(sample(text, 'robustrl_bus_consumer_restarts_total{group="stuck"}')).toBe(0);
      expect(sample(text, 'robustrl_bus_dead_letters_total{topic="robustrl.telemetry",reason="invalid"}')).toBe(2);
      expect(text).toContain('# TYPE robustrl_bus_dead_letters_total counter');
      expect(text).toContain('# TYPE robustrl_bus_consumer_restarts_total counter');
    } finally {
      release();
      await bus.close();
    }
  });

  it('shows a consumer that is down, its restarts, no lag while it is unknown, and an unreachable broker — from one health check per scrape', async () => {
    let checks = 0;
    const health: BusHealth = {
      reachable: false,
      error: 'connection refused',
      subscriptions: [
        { groupId: 'robustrl-detector', running: false, restarts: 3, lag: null, error: 'KafkaJSNonRetriableError' },
        { groupId: 'robustrl-controller', running: true, restarts: 1, lag: 12 },
      ],
    };
    const counts: DeadLetterCount[] = [{ topic: 'robustrl.control', reason: 'handler-failed', count: 5 }];
    const registry = new Registry();
    registerBusMetrics(registry, { health: async () => (checks++, health), deadLetterCounts: () => counts });

    const text = await registry.metrics();
    expect(checks).toBe(1);
    expect(sample(text, 'robustrl_bus_reachable')).toBe(0);
    expect(sample(text, 'robustrl_bus_consumer_running{group="robustrl-detector"}')).toBe(0);
    expect(sample(text, 'robustrl_bus_consumer_running{group="robustrl-controller"}')).toBe(1);
    expect(sample(text, 'robustrl_bus_consumer_restarts_total{group="robustrl-detector"}')).toBe(3);
    expect(sample(text, 'robustrl_bus_consumer_lag{group="robustrl-detector"}')).toBeUndefined();
    expect(sample(text, 'robustrl_bus_consumer_lag{group="robustrl-controller"}')).toBe(12);
    expect(sample(text, 'robustrl_bus_dead_letters_total{topic="robustrl.control",reason="handler-failed"}')).toBe(5);

    // The next scrape asks again, and shows what changed (a closed subscription is gone).
    health.subscriptions = [{ groupId: 'robustrl-controller', running: true, restarts: 2, lag: 0 }];
    counts[0].count = 6;
    const next = await registry.metrics();
    expect(checks).toBe(2);
    expect(sample(next, 'robustrl_bus_consumer_running{group="robustrl-detector"}')).toBeUndefined();
    expect(sample(next, 'robustrl_bus_consumer_restarts_total{group="robustrl-controller"}')).toBe(2);
    expect(sample(next, 'robustrl_bus_dead_letters_total{topic="robustrl.control",reason="handler-failed"}')).toBe(6);
  });
});
