import 'reflect-metadata';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { DynamicModule, INestApplication, Logger, LogLevel, Module, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { ContextPropagation, setupTelemetry } from '@robustrl/telemetry';
import { CoreModule } from './core.module';
import { HealthController } from './health.controller';
import { MetricsController } from './metrics.controller';
import { checkBearer, httpAuthFromEnv, PUBLIC_PATHS, reloadTokens, scopeOfServiceRequest, unauthorizedResponse } from './http-auth';
import { limitServer } from './http-server-limits';
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
    /** The signals that close the application at once (default SIGINT and SIGTERM); a service may handle others itself. */
    shutdownSignals?: NodeJS.Signals[];
    /**
     * How trace context follows the service's code (ContextPropagation; default `async`). `synchronous`
     * suits a service whose outputs carry their trace explicitly (decisions, command executors) and whose
     * hot path is many promises (the router).
     */
    contextPropagation?: ContextPropagation;
  } = {},
): Promise<RunningService> {
  const telemetry = await setupTelemetry(`robustrl-${config.serviceName}`, process.env, options.contextPropagation);
  @Module({ imports: [CoreModule.forRoot(config), ...modules], controllers: config.httpPort === null ? [] : [HealthController, MetricsController] })
  class ProcessModule {}

  const logger = new Logger(config.serviceName);
  const app = await NestFactory.create<NestExpressApplication>(ProcessModule, { logger: options.logLevels ?? ['log', 'warn', 'error'] });
  app.useBodyParser('json', { limit: options.jsonBodyLimit ?? '1mb' });
  limitServer(app.getHttpServer());
  app.enableShutdownHooks(options.shutdownSignals ?? ['SIGINT', 'SIGTERM']);
  let stopReload: () => void = () => undefined;
  if (config.httpPort !== null) {
    const host = config.httpHost ?? DEFAULT_HTTP_HOST;
    const auth = config.httpAuth ?? httpAuthFromEnv({}, host);
    // Tokens rotate without a restart: the file is read again when it changes, and on SIGHUP.
    stopReload = reloadTokens(auth, config.httpAuthSettings ?? {}, 'ROBUSTRL_HTTP', { log: (m) => logger.log(m) });
    if (auth.kind === 'bearer') {
      // Before every route, unknown ones included: an unauthenticated caller learns nothing, not even which paths exist.
      app.use((req: IncomingMessage, res: ServerResponse, next: () => void) => {
        const path = (req.url ?? '/').split('?')[0];
        if (PUBLIC_PATHS.has(path)) return next();
        const verdict = checkBearer(auth, req.headers.authorization, scopeOfServiceRequest(req.method, path));
        if (verdict.ok) return next();
        const refusal = unauthorizedResponse(verdict);
        res.writeHead(refusal.status, refusal.headers).end(refusal.body);
      });
    }
    await app.listen(config.httpPort, host);
    logger.log(`health at ${await app.getUrl()}/healthz (API ${auth.kind === 'bearer' ? 'behind bearer tokens' : `open: ${auth.why}`})`);
  } else {
    await app.init();
  }
  logger.log(`ready (bus: ${config.bus.adapter}, store: ${config.store.kind}${telemetry.exporting ? ', exporting traces' : ''})`);
  return {
    app,
    stop: async () => {
      stopReload();
      await app.close();
      await telemetry.shutdown();
    },
  };
}
