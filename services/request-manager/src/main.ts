import { runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { RequestManagerModule } from './request-manager.module';

runService(serviceConfigFromEnv('request-manager', 8083), [RequestManagerModule], { jsonBodyLimit: '64mb' }).catch((err: unknown) => {
  console.error(`request-manager failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
