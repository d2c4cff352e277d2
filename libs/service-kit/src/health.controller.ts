import { Controller, Get, Inject } from '@nestjs/common';
import { MessageBus } from '@robustrl/bus';
import { EventStore } from '@robustrl/store';
import { EVENT_STORE, MESSAGE_BUS, SERVICE_CONFIG } from './tokens';
import { ServiceConfig } from './service-config';

@Controller()
export class HealthController {
  constructor(
    @Inject(SERVICE_CONFIG) private readonly config: ServiceConfig,
    @Inject(MESSAGE_BUS) private readonly bus: MessageBus,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  @Get('healthz')
  async health() {
    await this.store.dataSource.query('SELECT 1');
    return { service: this.config.serviceName, bus: this.bus.adapter, store: this.store.backend, status: 'ok' };
  }
}
