import { KubernetesOrchestrator } from './kubernetes/kubernetes-orchestrator';
import { Orchestrator } from './orchestrator';

/**
 * The orchestrator a service uses, from ROBUSTRL_ORCHESTRATOR: `kubernetes` (in-cluster or kubeconfig
 * credentials, see the Kubernetes adapter's variables) or `none` (the default: commands that need
 * the platform are decided but not carried out). The local process supervisor is given in code
 * (tests, the demo): it must own the processes it supervises.
 */
export function orchestratorFromEnv(env: NodeJS.ProcessEnv): Orchestrator | null {
  const kind = env.ROBUSTRL_ORCHESTRATOR ?? 'none';
  if (kind === 'none') return null;
  if (kind === 'kubernetes') return KubernetesOrchestrator.fromEnv(env);
  throw new Error(`ROBUSTRL_ORCHESTRATOR must be 'kubernetes' or 'none', got '${kind}'`);
}
