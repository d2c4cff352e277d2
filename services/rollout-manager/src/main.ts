import { runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { RolloutManagerModule } from './rollout-manager.module';

// Inside the promise: a bad setting is reported as such, not thrown as an uncaught exception.
Promise.resolve()
  .then(() => runService(serviceConfigFromEnv('rollout-manager', 8084), [RolloutManagerModule]))
  .catch((err: unknown) => {
    console.error(`rollout-manager failed to start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
