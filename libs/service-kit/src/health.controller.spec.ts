import { InProcessBus } from '@robustrl/bus';
import { Topics } from '@robustrl/contracts';
import { EventStore } from '@robustrl/store';
import { HealthController } from './health.controller';
import { ServiceConfig } from './service-config';

describe('health: alive is not ready', () => {
  const config: ServiceConfig = { serviceName: 'spec', bus: { adapter: 'in-process' }, store: { kind: 'pglite' }, httpPort: null };
  const response = () => {
    const res = { code: 0, status: (code: number) => (res.code = code) };
    return res;
  };

  it('ready with the store answering and every consumer running with a known lag; not ready once the bus is gone, alive all along', async () => {
    const bus = new InProcessBus({ logger: { info: () => undefined, warn: () => undefined, error: () => undefined } });
    const store = await EventStore.open({ kind: 'pglite' });
    const health = new HealthController(config, bus, store);
    try {
      await bus.subscribe({ groupId: 'spec-group', topics: [Topics.training], handler: async () => undefined });
      const res = response();
      const ready = await health.ready(res);
      expect(res.code).toBe(200);
      expect(ready).toMatchObject({
        ready: true,
        store: { reachable: true },
        bus: { reachable: true, subscriptions: [{ groupId: 'spec-group', running: true, lag: 0 }] },
      });

      await bus.close();
      const after = response();
      expect(await health.ready(after)).toMatchObject({ ready: false, bus: { reachable: false, error: 'bus is closed' } });
      expect(after.code).toBe(503);
      expect(health.health()).toEqual({ service: 'spec', status: 'alive' });
    } finally {
      await store.close();
    }
  });

  it('not ready when the store does not answer', async () => {
    const bus = new InProcessBus();
    const store = await EventStore.open({ kind: 'pglite' });
    await store.close();
    const res = response();
    const ready = await new HealthController(config, bus, store).ready(res);
    expect(res.code).toBe(503);
    expect(ready).toMatchObject({ ready: false, store: { reachable: false }, bus: { reachable: true } });
    await bus.close();
  });
});
