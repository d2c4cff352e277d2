import { Controller, Get, HttpCode, Inject, Res } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { EventStore } from '@robustrl/store';
import { EVENT_STORE, MESSAGE_BUS, SERVICE_CONFIG } from './tokens';
import { ServiceConfig } from './service-config';

/** How long readiness waits for the store before calling it unreachable (probes run every few seconds). */
const STORE_CHECK_TIMEOUT_MS = 3_000;

/**
 * Liveness and readiness, for Kubernetes probes and operators:
 *  - `GET /healthz`: the process is alive and serving HTTP. No dependency is checked, so a store or
 *    broker outage does not get a healthy process restarted (it waits and retries instead).
 *  - `GET /readyz`: the service can do its work — the store answers, the broker is reachable, and every
 *    consumer is running with a known lag. 200 when all hold, 503 with what failed otherwise.
 */
@Controller()
export class HealthController {
  constructor(
    @Inject(SERVICE_CONFIG) private readonly config: ServiceConfig,
    @Inject(MESSAGE_BUS) private readonly bus: MessageBus,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  @Get('healthz')
  @HttpCode(200)
  health() {
    return { service: this.config.serviceName, status: 'alive' };
  }

  @Get('readyz')
  // The platform's response (Express): only its status is set, the body is returned.
  async ready(@Res({ passthrough: true }) res: { status(code: number): unknown }) {
    const [store, bus] = await Promise.all([this.checkStore(), this.bus.health()]);
    const consumersOk = bus.subscriptions.every((s) => s.running && s.lag !== null);
    const ready = store.reachable && bus.reachable && consumersOk;
    res.status(ready ? 200 : 503);
    return {
      service: this.config.serviceName,
      ready,
      store: { backend: this.store.backend, ...store },
      bus: { adapter: this.bus.adapter, ...bus },
    };
  }

  private async checkStore(): Promise<{ reachable: boolean; error?: string }> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.store.dataSource.query('SELECT 1'),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${STORE_CHECK_TIMEOUT_MS} ms`)), STORE_CHECK_TIMEOUT_MS);
        }),
      ]);
      return { reachable: true };
    } catch (err) {
      return { reachable: false, error: err instanceof Error ? err.message : String(err) };
    } finally {
      clearTimeout(timer);
    }
  }
}
