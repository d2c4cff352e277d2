import { runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { DetectorModule } from './detector.module';

// Inside the promise: a bad setting is reported as such, not thrown as an uncaught exception.
Promise.resolve()
  .then(() => runService(serviceConfigFromEnv('detector', 8081), [DetectorModule]))
  .catch((err: unknown) => {
    console.error(`detector failed to start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
