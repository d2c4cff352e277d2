import { DynamicModule, Global, Inject, Logger, Module, OnApplicationShutdown } from '@nestjs/common';
import { createBus, MessageBus, untilAvailable } from '@robustrl/bus';
import { EventStore } from '@robustrl/store';
import { Registry } from 'prom-client';
import { registerBusMetrics } from './bus-metrics';
import { CLOCK, EVENT_STORE, MESSAGE_BUS, METRICS_REGISTRY, SERVICE_CONFIG } from './tokens';
import { ServiceConfig } from './service-config';
import { nestBusLogger } from './nest-bus-logger';

/**
 * The bus, the store, the config and the metrics registry, once per process. In the embedded mode all six service modules
 * share one instance of each, which is what makes "all services in one process" a real composition.
 */
@Global()
@Module({})
export class CoreModule implements OnApplicationShutdown {
  private readonly logger = new Logger('core');

  constructor(
    @Inject(MESSAGE_BUS) private readonly bus: MessageBus,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  static forRoot(config: ServiceConfig): DynamicModule {
    return {
      module: CoreModule,
      providers: [
        { provide: SERVICE_CONFIG, useValue: config },
        { provide: CLOCK, useValue: config.clock ?? Date.now },
        // Every consumer of the process dead-letters through the store's ledger: once per bad record, not per group.
        {
          provide: MESSAGE_BUS,
          useFactory: (store: EventStore) => createBus(config.bus, nestBusLogger(config.serviceName), store.deadLetterClaims, config.identity),
          inject: [EVENT_STORE],
        },
        // A service started before its database waits for it (a log line per attempt) instead of exiting.
        {
          provide: EVENT_STORE,
          useFactory: () =>
            untilAvailable('the store (PostgreSQL)', () => EventStore.open(config.store), { logger: nestBusLogger(config.serviceName, 'store') }),
        },
        // One registry per process (not prom-client's global one): several apps in one process (tests) keep theirs apart.
        {
          provide: METRICS_REGISTRY,
          useFactory: (bus: MessageBus) => {
            const registry = new Registry();
            registerBusMetrics(registry, bus);
            return registry;
          },
          inject: [MESSAGE_BUS],
        },
      ],
      exports: [SERVICE_CONFIG, MESSAGE_BUS, EVENT_STORE, CLOCK, METRICS_REGISTRY],
    };
  }

  /** Consumers stop first (their in-flight handlers finish and commit), then the store closes. */
  async onApplicationShutdown(signal?: string): Promise<void> {
    this.logger.log(`shutting down${signal ? ` on ${signal}` : ''}: closing the bus, then the store`);
    await this.bus.close();
    await this.store.close();
    this.logger.log('bus and store closed: nothing left in flight');
  }
}
