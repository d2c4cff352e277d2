import { runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { ControllerModule } from './controller.module';

// Inside the promise: a bad setting is reported as such, not thrown as an uncaught exception.
Promise.resolve()
  .then(() => runService(serviceConfigFromEnv('controller', 8082), [ControllerModule]))
  .catch((err: unknown) => {
    console.error(`controller failed to start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
