import { runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { RolloutManagerModule } from './rollout-manager.module';

runService(serviceConfigFromEnv('rollout-manager', 8084), [RolloutManagerModule]).catch((err: unknown) => {
  console.error(`rollout-manager failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
