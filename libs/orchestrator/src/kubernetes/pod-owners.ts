import type { AppsV1Api, V1Deployment, V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import { PatchUtils } from '@kubernetes/client-node';
import type { Role } from '@robustrl/contracts';
import { OrchestratorError } from '../orchestrator';
import { BoundedMap, MAX_REMEMBERED_OPERATIONS } from '../operation-memo';
import { statusOf, toOrchestratorError } from './api-errors';
import { OwnerAnnotations } from './pod-labels';
import { poolKey } from './pods';

export type OwnerKind = 'Deployment' | 'StatefulSet';
export type Owner = { kind: OwnerKind; name: string };
export type OwnerObject = V1Deployment | V1StatefulSet;

/** Optimistic replicas patches lost to concurrent writers before giving up (retriably). */
const MAX_SCALE_ATTEMPTS = 20;
/** Node and owner annotations are size-limited in total; a reason is for humans, its head is enough. */
export const MAX_REASON_LENGTH = 1_024;

/**
 * The StatefulSets and Deployments that own a job's pools, and their replicas: how the adapter scales a
 * pool up or down (libs/orchestrator/README.md, "Kubernetes adapter").
 */
export class PodOwners {
  /** Per job/role/zone/class, the owner found for it: a pool scaled down to zero pods has no pod left to find it from. */
  readonly known = new BoundedMap<string, Owner>(MAX_REMEMBERED_OPERATIONS);

  constructor(
    private readonly apps: AppsV1Api,
    private readonly namespace: string,
    private readonly assertOpen: () => void,
  ) {}

  /**
   * The StatefulSet or Deployment that owns the pool (job/role/zone/class), found through its pods'
   * controller references (a Deployment's through their ReplicaSet). Remembered per pool, for when
   * the pool has been scaled down to no pods.
   */
  async ownerOfPool(pool: { jobId: string; role: Role; zone: string; hardwareClass: string }, pods: V1Pod[]): Promise<Owner> {
    const key = poolKey(pool, pool.jobId);
    const describe = `the pods of job ${pool.jobId} role ${pool.role} zone ${pool.zone} hardware class ${pool.hardwareClass} in namespace ${this.namespace}`;
    const owners = new Map<string, Owner>();
    for (const pod of pods) {
      const owner = await this.ownerOfPod(pod);
      if (owner) owners.set(`${owner.kind}/${owner.name}`, owner);
    }
    if (owners.size > 1) {
      throw new OrchestratorError(
        `cannot scale up: ${describe} belong to several owners (${[...owners.keys()].join(', ')}); which one to scale is ambiguous`,
        false,
      );
    }
    const [owner] = owners.values();
    if (owner) {
      this.known.set(key, owner);
      return owner;
    }
    const known = this.known.get(key);
    if (known) return known;
    if (pods.length > 0) {
      throw new OrchestratorError(`cannot scale up: ${describe} are bare pods, owned by no StatefulSet or Deployment whose replicas could be raised`, false);
    }
    throw new OrchestratorError(`cannot scale up: there are no ${describe}, so there is no owner to find through them`, false);
  }

  /** The pod's StatefulSet or Deployment (through its ReplicaSet); undefined for a bare pod. */
  async ownerOfPod(pod: V1Pod): Promise<Owner | undefined> {
    const controller = pod.metadata?.ownerReferences?.find((o) => o.controller);
    if (!controller) return undefined;
    if (controller.kind === 'StatefulSet') return { kind: 'StatefulSet', name: controller.name };
    if (controller.kind === 'ReplicaSet') {
      let replicaSetOwner;
      try {
        const { body } = await this.apps.readNamespacedReplicaSet(controller.name, this.namespace);
        replicaSetOwner = body.metadata?.ownerReferences?.find((o) => o.controller);
      } catch (error) {
        throw toOrchestratorError(error, `read replicaset ${this.namespace}/${controller.name} (owner of pod ${pod.metadata?.name})`);
      }
      if (replicaSetOwner?.kind === 'Deployment') return { kind: 'Deployment', name: replicaSetOwner.name };
    }
    // Scaling a bare ReplicaSet, a Job or a DaemonSet is not what a pool's replicas mean.
    throw new OrchestratorError(
      `pod ${this.namespace}/${pod.metadata?.name} is owned by ${controller.kind} ${controller.name}, not by a StatefulSet or a Deployment; robustrl scales only those`,
      false,
    );
  }

  /**
   * Changes the owner's replicas by `delta` with a merge patch that carries the resourceVersion read
   * just before: a concurrent change (another scale-up, an autoscaler) makes it fail with 409, and it
   * is re-read and tried again, so concurrent scale-ups each add one instead of all writing the same
   * number. The owner is annotated with the operation and why.
   */
  async scaleOwner(owner: Owner, delta: number, operationId: string, reason: string): Promise<{ object: OwnerObject; replicasAfter: number }> {
    const what = `${owner.kind.toLowerCase()} ${this.namespace}/${owner.name}`;
    for (let attempt = 0; attempt < MAX_SCALE_ATTEMPTS; attempt++) {
      this.assertOpen();
      const current = await this.readOwner(owner);
      const replicas = current.spec?.replicas ?? 1;
      // This operation's patch already went through (e.g. before this controller restarted): do not scale twice.
      if (current.metadata?.annotations?.[OwnerAnnotations.operation] === operationId) return { object: current, replicasAfter: replicas };
      if (replicas + delta < 0) throw new OrchestratorError(`cannot scale ${what} below 0 replicas`, false);
      const patch = {
        metadata: {
          resourceVersion: current.metadata?.resourceVersion,
          annotations: { [OwnerAnnotations.operation]: operationId, [OwnerAnnotations.scaleReason]: reason.slice(0, MAX_REASON_LENGTH) },
        },
        spec: { replicas: replicas + delta },
      };
      try {
        return { object: await this.patchOwner(owner, patch), replicasAfter: replicas + delta };
      } catch (error) {
        if (statusOf(error) === 409) continue;
        throw toOrchestratorError(error, `scale ${what} from ${replicas} to ${replicas + delta} replicas`);
      }
    }
    throw new OrchestratorError(`scale ${what}: ${MAX_SCALE_ATTEMPTS} attempts in a row lost to concurrent changes`, true);
  }

  async readOwner(owner: Owner): Promise<OwnerObject> {
    try {
      const { body } =
        owner.kind === 'Deployment'
          ? await this.apps.readNamespacedDeployment(owner.name, this.namespace)
          : await this.apps.readNamespacedStatefulSet(owner.name, this.namespace);
      return body;
    } catch (error) {
      throw toOrchestratorError(error, `read ${owner.kind.toLowerCase()} ${this.namespace}/${owner.name}`);
    }
  }

  /** Throws the raw error, so that the caller can tell a conflict (409) from the rest. */
  async patchOwner(owner: Owner, patch: object): Promise<OwnerObject> {
    const options = { headers: { 'Content-Type': PatchUtils.PATCH_FORMAT_JSON_MERGE_PATCH } };
    const { body } =
      owner.kind === 'Deployment'
        ? await this.apps.patchNamespacedDeployment(owner.name, this.namespace, patch, undefined, undefined, undefined, undefined, undefined, options)
        : await this.apps.patchNamespacedStatefulSet(owner.name, this.namespace, patch, undefined, undefined, undefined, undefined, undefined, options);
    return body;
  }
}
