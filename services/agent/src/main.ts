import { runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { agentConfigFromEnv } from './agent-config';
import { AgentModule } from './agent.module';

async function main(): Promise<void> {
  // Validate first: a misconfigured agent says what is wrong before connecting to anything.
  const agent = agentConfigFromEnv(process.env);
  const service = await runService({ ...serviceConfigFromEnv(`agent-${agent.machineId}`, agent.apiPort), httpPort: agent.apiPort }, [AgentModule]);
  const url = (await service.app.getUrl()).replace('[::1]', '127.0.0.1');
  await service.app.get(AgentModule).startWithApi(url);
}

main().catch((err: unknown) => {
  console.error(`agent failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
