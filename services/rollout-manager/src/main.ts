import { runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { RolloutManagerModule } from './rollout-manager.module';

// Inside the promise: a bad setting is reported as such, not thrown as an uncaught exception.
Promise.resolve()
  // Trace context within synchronous calls only: the pool's decisions and the scaler's outcomes carry their
  // trace explicitly, and the async manager's hook on every promise costs the router 2–13 % of its CPU
  // with recording on (libs/telemetry/src/synchronous-context.ts).
  .then(() => runService(serviceConfigFromEnv('rollout-manager', 8084), [RolloutManagerModule], { contextPropagation: 'synchronous' }))
  .catch((err: unknown) => {
    console.error(`rollout-manager failed to start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
