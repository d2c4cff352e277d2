import type { CoreV1Api, V1Node, V1Pod } from '@kubernetes/client-node';
import type { Departure, DepartureSource } from '../departures';
import { toOrchestratorError, statusOf } from './api-errors';
import { departuresOf } from './disruption-notices';

export interface KubernetesDeparturesOptions {
  core: CoreV1Api;
  namespace: string;
  jobLabel: string;
  roleLabel: string;
  /** Taint keys that announce a node's removal (disruption-notices.ts). */
  noticeTaints: readonly string[];
  /** A pod whose end the orchestrator caused itself. */
  causedHere: (pod: V1Pod) => boolean;
  clock?: () => number;
}

/**
 * The departures the Kubernetes API announces for the namespace's job pods (disruption-notices.ts
 * says which): one list of the pods with a job label, and a read of each node they run on (the
 * controller's role may `get` nodes; it need not list them).
 */
export class KubernetesDepartures implements DepartureSource {
  private readonly noticeTaints: ReadonlySet<string>;
  constructor(private readonly options: KubernetesDeparturesOptions) {
    this.noticeTaints = new Set(options.noticeTaints);
  }

  async departures(): Promise<Departure[]> {
    const { core, namespace, jobLabel, roleLabel } = this.options;
    let pods: V1Pod[];
    try {
      pods = (await core.listNamespacedPod(namespace, undefined, undefined, undefined, undefined, jobLabel)).body.items;
    } catch (error) {
      throw toOrchestratorError(error, `list pods in namespace ${namespace} with label ${jobLabel}`);
    }
    const nodes = new Map<string, V1Node>();
    for (const name of new Set(pods.map((p) => p.spec?.nodeName).filter((n): n is string => !!n))) {
      try {
        nodes.set(name, (await core.readNode(name)).body);
      } catch (error) {
        if (statusOf(error) === 404) continue; // a node already gone: its pods' own state says the rest
        throw toOrchestratorError(error, `read node ${name}`);
      }
    }
    return departuresOf(pods, nodes, {
      jobLabel,
      roleLabel,
      noticeTaints: this.noticeTaints,
      causedHere: this.options.causedHere,
      now: (this.options.clock ?? Date.now)(),
    });
  }
}
