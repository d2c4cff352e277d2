import { Counter, Gauge, Registry } from 'prom-client';
import { BusHealth, MessageBus } from '@robustrl/bus';

/**
 * The bus as Prometheus sees it, in a service's registry (served at `/metrics`):
 *  - `robustrl_bus_reachable` — 1 when the broker answers;
 *  - `robustrl_bus_consumer_running{group}` — 1 while the subscription's consumer is up;
 *  - `robustrl_bus_consumer_lag{group}` — records published but not yet committed by the group (absent while unknown);
 *  - `robustrl_bus_consumer_restarts_total{group}` — restarts of the consumer after a crash;
 *  - `robustrl_bus_dead_letters_total{topic,reason}` — dead letters this process wrote, by original topic and reason.
 *
 * Read when scraped, from `bus.health()` (lag needs the broker's offsets, which nothing else tracks)
 * and the adapter's dead-letter counts. All gauges of one scrape share one health check: prom-client
 * starts every metric's collect() in the same tick, so the in-flight check is reused, and dropped once
 * it settles so the next scrape asks again.
 */
export function registerBusMetrics(registry: Registry, bus: Pick<MessageBus, 'health' | 'deadLetterCounts'>): void {
  let inFlight: Promise<BusHealth> | null = null;
  const health = (): Promise<BusHealth> => {
    if (inFlight === null) {
      const check = bus.health();
      inFlight = check;
      void check.finally(() => (inFlight = null)).catch(() => undefined);
    }
    return inFlight;
  };
  new Gauge({
    name: 'robustrl_bus_reachable',
    help: 'Whether the broker answers (1) or not (0)',
    registers: [registry],
    async collect() {
      this.set((await health()).reachable ? 1 : 0);
    },
  });
  new Gauge({
    name: 'robustrl_bus_consumer_running',
    help: 'Whether the consumer of a subscription (by consumer group) is up (1) or down (0)',
    labelNames: ['group'],
    registers: [registry],
    async collect() {
      const { subscriptions } = await health();
      this.reset();
      for (const s of subscriptions) this.set({ group: s.groupId }, s.running ? 1 : 0);
    },
  });
  new Gauge({
    name: 'robustrl_bus_consumer_lag',
    help: 'Records published to the topics of a consumer group but not yet committed by it',
    labelNames: ['group'],
    registers: [registry],
    async collect() {
      const { subscriptions } = await health();
      this.reset();
      // Unknown (broker unreachable, offsets not answered in time) is left out rather than reported as 0.
      for (const s of subscriptions) if (s.lag !== null) this.set({ group: s.groupId }, s.lag);
    },
  });
  new Counter({
    name: 'robustrl_bus_consumer_restarts_total',
    help: 'Restarts of the consumer of a consumer group after it crashed',
    labelNames: ['group'],
    registers: [registry],
    async collect() {
      const { subscriptions } = await health();
      this.reset();
      for (const s of subscriptions) this.inc({ group: s.groupId }, s.restarts);
    },
  });
  new Counter({
    name: 'robustrl_bus_dead_letters_total',
    help: 'Dead letters written by this process, by the topic of the bad record and the reason (invalid, handler-failed)',
    labelNames: ['topic', 'reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const c of bus.deadLetterCounts()) this.inc({ topic: c.topic, reason: c.reason }, c.count);
    },
  });
}
