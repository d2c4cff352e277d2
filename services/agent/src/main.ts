import { runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { AgentModule } from './agent.module';

runService(serviceConfigFromEnv('agent', 8086), [AgentModule]).catch((err: unknown) => {
  console.error(`agent failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
