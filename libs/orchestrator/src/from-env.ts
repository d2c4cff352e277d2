import { HttpOrchestrator } from './http/orchestrator-http';
import { KubernetesOrchestrator } from './kubernetes/kubernetes-orchestrator';
import { Orchestrator } from './orchestrator';
import { ORCHESTRATOR } from './orchestrator-settings';

/**
 * The orchestrator a service uses, from ROBUSTRL_ORCHESTRATOR: `kubernetes` (in-cluster or kubeconfig
 * credentials, see the Kubernetes adapter's variables), `http` (a machine host serving the port at
 * ROBUSTRL_ORCHESTRATOR_URL, see http/orchestrator-http.ts) or `none` (the default: commands that need
 * the platform are decided but not carried out). The local process supervisor is given in code
 * (tests, the demo) or served by a machine host: it must own the processes it supervises.
 */
export function orchestratorFromEnv(env: NodeJS.ProcessEnv): Orchestrator | null {
  const kind = ORCHESTRATOR.read(env);
  if (kind === 'kubernetes') return KubernetesOrchestrator.fromEnv(env);
  if (kind === 'http') return HttpOrchestrator.fromEnv(env);
  return null;
}
