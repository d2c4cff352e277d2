import { runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { WeightRegistryModule } from './weight-registry.module';

// Inside the promise: a bad setting is reported as such, not thrown as an uncaught exception.
Promise.resolve()
  .then(() => runService(serviceConfigFromEnv('weight-registry', 8085), [WeightRegistryModule]))
  .catch((err: unknown) => {
    console.error(`weight-registry failed to start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
