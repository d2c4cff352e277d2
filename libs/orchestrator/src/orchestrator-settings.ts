import { custom, oneOf, text } from '@robustrl/config';
import { DEFAULT_NOTICE_TAINTS } from './kubernetes/disruption-notices';

/**
 * What a service that acts on the platform reads to reach it (docs/operators/configuration-reference.md):
 * the controller (replacements, restarts, departures) and the rollout manager (scaling its pool), through
 * orchestratorFromEnv. The machine host's tokens (`ROBUSTRL_ORCHESTRATOR_TOKENS`, `_FILE`) are read as every
 * HTTP API's are (service-kit's http-auth.ts).
 */
const owner = 'controller, rollout-manager';

export const DEFAULT_READY_TIMEOUT_MS = 10 * 60_000;
export const DEFAULT_POLL_INTERVAL_MS = 2_000;

export const ORCHESTRATOR = oneOf('ROBUSTRL_ORCHESTRATOR', ['kubernetes', 'http', 'none'], {
  owner,
  meaning:
    '`kubernetes` (in-cluster or kubeconfig credentials), `http` (a machine host at `ROBUSTRL_ORCHESTRATOR_URL`, libs/orchestrator/README.md) or `none` (ReplaceMachine and RestartTask then time out for an operator)',
  default: 'none',
});
export const ORCHESTRATOR_URL = custom('ROBUSTRL_ORCHESTRATOR_URL', {
  owner,
  meaning: "with `ROBUSTRL_ORCHESTRATOR=http`: the machine host's base URL",
  default: undefined,
  accepted: "the machine host's base URL (http://host:port)",
  parse: (raw) => (/^https?:\/\/[^/\s]+/.test(raw) ? raw : undefined),
});

// The Kubernetes adapter (kubernetes/kubernetes-orchestrator.ts).
export const K8S_NAMESPACE = text('ROBUSTRL_K8S_NAMESPACE', {
  owner,
  meaning: "Kubernetes: the namespace of the job's pods",
  default: undefined,
  defaultText: "the kubeconfig context's namespace (in a pod, the service account's)",
});
/** Milliseconds, a whole number > 0 (the accepted form as the adapter has always said it). */
const milliseconds = (name: string, meaning: string, fallback: number, defaultText: string) =>
  custom(name, {
    owner,
    meaning,
    default: fallback,
    defaultText,
    accepted: 'a positive integer (milliseconds)',
    parse: (raw) => {
      const value = Number(raw);
      return Number.isInteger(value) && value > 0 ? value : undefined;
    },
  });
export const K8S_READY_TIMEOUT_MS = milliseconds(
  'ROBUSTRL_K8S_READY_TIMEOUT_MS',
  'Kubernetes: how long a machine request, a machine restart or a task restart waits for the new pods to be Running',
  DEFAULT_READY_TIMEOUT_MS,
  `${DEFAULT_READY_TIMEOUT_MS} (10 min)`,
);
export const K8S_POLL_INTERVAL_MS = milliseconds(
  'ROBUSTRL_K8S_POLL_INTERVAL_MS',
  'Kubernetes: how often pods are read while waiting for them',
  DEFAULT_POLL_INTERVAL_MS,
  `${DEFAULT_POLL_INTERVAL_MS} (2 s)`,
);
export const K8S_NOTICE_TAINTS = custom('ROBUSTRL_K8S_NOTICE_TAINTS', {
  owner,
  meaning: `Kubernetes: taint keys that announce a node's removal, besides ${DEFAULT_NOTICE_TAINTS.map((t) => `\`${t}\``).join(' and ')} (docs/planned-failures.md)`,
  default: [] as string[],
  defaultText: 'none more',
  accepted: 'taint keys, comma separated',
  parse: (raw) =>
    raw
      .split(',')
      .map((key) => key.trim())
      .filter(Boolean),
});
