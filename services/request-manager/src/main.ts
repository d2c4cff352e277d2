import { runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { RequestManagerModule } from './request-manager.module';

// Inside the promise: a bad setting is reported as such, not thrown as an uncaught exception.
Promise.resolve()
  .then(() => runService(serviceConfigFromEnv('request-manager', 8083), [RequestManagerModule], { jsonBodyLimit: '64mb' }))
  .catch((err: unknown) => {
    console.error(`request-manager failed to start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
