import 'reflect-metadata';
import { DynamicModule, INestApplication, Logger, LogLevel, Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { setupTelemetry } from '@robustrl/telemetry';
import { CoreModule } from './core.module';
import { HealthController } from './health.controller';
import { MetricsController } from './metrics.controller';
import { DEFAULT_HTTP_HOST, ServiceConfig } from './service-config';

/**
 * Boot one process: telemetry (OTEL_* variables), the core module, the given service modules, and the
 * health and metrics endpoints. SIGINT/SIGTERM close consumers gracefully (in-flight handlers finish and commit).
 */
export interface RunningService {
  app: INestApplication;
  stop(): Promise<void>;
}

export async function runService(
  config: ServiceConfig,
  modules: Array<Type | DynamicModule>,
  options: {
    logLevels?: LogLevel[];
    /** Largest JSON request body; Nest's own default (100 kB) is too small for batched trajectory turns. */
    jsonBodyLimit?: string;
  } = {},
): Promise<RunningService> {
  const telemetry = await setupTelemetry(`robustrl-${config.serviceName}`);
  @Module({ imports: [CoreModule.forRoot(config), ...modules], controllers: config.httpPort === null ? [] : [HealthController, MetricsController] })
  class ProcessModule {}

  const logger = new Logger(config.serviceName);
  const app = await NestFactory.create<NestExpressApplication>(ProcessModule, { logger: options.logLevels ?? ['log', 'warn', 'error'] });
  app.useBodyParser('json', { limit: options.jsonBodyLimit ?? '1mb' });
  app.enableShutdownHooks(['SIGINT', 'SIGTERM']);
  if (config.httpPort !== null) {
    await app.listen(config.httpPort, config.httpHost ?? DEFAULT_HTTP_HOST);
    logger.log(`health at ${await app.getUrl()}/healthz`);
  } else {
    await app.init();
  }
  logger.log(`ready (bus: ${config.bus.adapter}, store: ${config.store.kind}${telemetry.exporting ? ', exporting traces' : ''})`);
  return {
    app,
    stop: async () => {
      await app.close();
      await telemetry.shutdown();
    },
  };
}
