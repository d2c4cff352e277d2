import type { Role } from '@robustrl/contracts';
import type { AgentConfig } from './agent-config';

/**
 * The environment the agent gives the framework's process (docs/integrators/agent-api.md): where its agent is and
 * how to call it, which job, machine and role it runs, how often it was restarted, and `extra` (a
 * group's rank and rendezvous, trainer-group.ts).
 */
export function roleEnv(
  config: Pick<AgentConfig, 'apiToken' | 'jobId' | 'machineId'>,
  now: { apiUrl: string; role: Role; restarts: number },
  extra: Record<string, string>,
): Record<string, string> {
  return {
    ROBUSTRL_AGENT_URL: now.apiUrl,
    // Lets the framework notice its agent is gone (e.g. exit instead of running on unsupervised).
    ROBUSTRL_AGENT_PID: String(process.pid),
    // The framework's client sends it (clients/python: AgentClient reads ROBUSTRL_AGENT_TOKEN).
    ...(config.apiToken ? { ROBUSTRL_AGENT_TOKEN: config.apiToken } : {}),
    ROBUSTRL_JOB_ID: config.jobId,
    ROBUSTRL_MACHINE_ID: config.machineId,
    ROBUSTRL_ROLE: now.role,
    ROBUSTRL_RESTART_COUNT: String(now.restarts),
    ...extra,
  };
}
