export * from './tokens';
export * from './service-config';
export * from './core.module';
export * from './event-recorder';
export * from './health.controller';
export * from './run-service';
export * from './nest-bus-logger';
export * from './deciding-consumer';
