import { busIdentityFromEnv, CONTROL_PLANE_PUBLIC_KEY } from '@robustrl/bus';
import { runService, serviceConfigFromEnv } from '@robustrl/service-kit';
import { agentApiEnv, agentConfigFromEnv } from './agent-config';
import { AgentModule } from './agent.module';
import { listenOnSocket } from './api-socket';

async function main(): Promise<void> {
  // Validate first: a misconfigured agent says what is wrong before connecting to anything.
  const agent = agentConfigFromEnv(process.env);
  // An agent speaks for its machine only (its machine key), never as a service: given the control
  // plane's secret it refuses to start, here, before anything reads it.
  const identity = busIdentityFromEnv(process.env, { machineId: agent.machineId });
  if (identity && CONTROL_PLANE_PUBLIC_KEY.read(process.env) === undefined)
    console.warn(
      'agent: no ROBUSTRL_CONTROL_PLANE_PUBLIC_KEY (robustrl identity control-plane-public-key): a retirement, release or probe is acted on ' +
        'without checking that the control plane sent it (any agent may write those topics)',
    );
  // The role process's own token is one of the API's caller tokens (agent-config.ts `apiToken`).
  const apiEnv = agentApiEnv(process.env, agent.apiToken);
  const service = await runService(
    { ...serviceConfigFromEnv(`agent-${agent.machineId}`, agent.apiPort, apiEnv), httpPort: agent.apiPort, identity },
    [AgentModule],
    { shutdownSignals: ['SIGINT'] },
  );
  // SIGTERM may be a notice (an eviction with a grace period): the agent reports it and keeps its roles
  // running while they are moved, then stops as on SIGINT and ends by the signal, as Nest's hook would.
  // A second SIGTERM meanwhile changes nothing (the roles are stopped in order either way).
  let stopping: Promise<void> | null = null;
  const onSigterm = (): void => {
    stopping ??= service.app
      .get(AgentModule)
      .terminate()
      .then(() => service.stop())
      .catch((err: unknown) => console.error(`agent: stopping: ${String(err)}`))
      .finally(() => {
        process.removeListener('SIGTERM', onSigterm);
        process.kill(process.pid, 'SIGTERM');
      });
  };
  process.on('SIGTERM', onSigterm);
  const url = (await service.app.getUrl()).replace('[::1]', '127.0.0.1');
  if (agent.apiSocket) {
    // The same application on the socket; closed (and its file removed) when the API's server closes.
    const socket = await listenOnSocket(service.app.getHttpAdapter().getInstance(), agent.apiSocket);
    service.app.getHttpServer().once('close', () => socket.close());
    console.log(`agent: local API also on unix:${agent.apiSocket}`);
  }
  await service.app.get(AgentModule).startWithApi(url);
}

main().catch((err: unknown) => {
  console.error(`agent failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
