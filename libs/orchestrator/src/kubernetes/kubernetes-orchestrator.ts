/**
 * The Kubernetes adapter of the orchestrator port.
 *
 * Mapping (also in libs/orchestrator/README.md, "Kubernetes adapter"):
 *
 *  - A machine is a pod in one namespace, labelled
 *      robustrl.io/job=<jobId>, robustrl.io/role=<trainer|rollout|hybrid>,
 *      robustrl.io/zone=<zone>, robustrl.io/hardware-class=<class>.
 *  - The machine id is the pod name. There is deliberately no label override: a pod template cannot
 *    give each replica its own label value, while the pod name reaches the agent through the downward
 *    API (`fieldRef: metadata.name`), so agent and orchestrator agree on the id without coordination.
 *  - The pods are owned by a StatefulSet or Deployment per role (and zone/class); this adapter never
 *    creates pods itself. Restarting or replacing a machine is deleting its pod and waiting for the
 *    owner's replacement to be Running. Replacements are told apart by pod UID, not name, because a
 *    StatefulSet recreates a pod under the same name.
 *  - Elastic pools go through the owner's replicas: a scale-up (`requestMachine` without `replaces`)
 *    patches the owner's `spec.replicas` + 1 and waits for the new pod; `releaseMachine` gives a pod's
 *    deletion cost the minimum and patches replicas − 1 (Deployment), or, since a StatefulSet only
 *    ever removes its highest ordinal, scales it down and releases that pod instead. Every replicas
 *    patch carries the owner's resourceVersion (a 409 on a concurrent change, then re-read and
 *    retried), so two concurrent scale-ups both count, and annotates the owner with the operation.
 *  - Isolating a machine cordons its node (`spec.unschedulable: true`, with annotations saying which
 *    machine, why, and which operation) before deleting the pod, so the replacement cannot land on
 *    the suspect node. Nobody here uncordons: that is for whoever repairs the node.
 *  - Idempotency per operationId is in memory: a repeated id returns the first result without
 *    calling the API again. An operation that failed (e.g. timed out waiting) is not remembered as
 *    done, but a restart whose pods were already deleted resumes waiting instead of deleting the
 *    replacements.
 */
import { AppsV1Api, CoreV1Api, KubeConfig, PatchUtils, V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import { Role } from '@robustrl/contracts';
import { MachineSpec, Orchestrator, OrchestratorError } from '../orchestrator';
import { BoundedMap, MAX_REMEMBERED_OPERATIONS, OperationKind, OperationMemo } from '../operation-memo';
import { Departure, DepartureSource } from '../departures';
import {
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_READY_TIMEOUT_MS,
  K8S_NAMESPACE,
  K8S_NOTICE_TAINTS,
  K8S_POLL_INTERVAL_MS,
  K8S_READY_TIMEOUT_MS,
} from '../orchestrator-settings';
import { statusOf, toOrchestratorError } from './api-errors';
import { DEFAULT_NOTICE_TAINTS } from './disruption-notices';
import { KubernetesDepartures } from './kubernetes-departures';
import { NodeAnnotations, PodAnnotations, PodLabels } from './pod-labels';
import { MAX_REASON_LENGTH, PodOwners } from './pod-owners';
import {
  creationTime,
  deletionStart,
  isLive,
  isolationKey,
  isPreconditionFailure,
  isRunning,
  isTerminating,
  labelValue,
  PodRef,
  podRef,
  podUid,
  poolKey,
  poolSelector,
  sleep,
  toMachineSpec,
} from './pods';

export { NodeAnnotations, OwnerAnnotations, PodAnnotations, PodLabels } from './pod-labels';

export interface KubernetesOrchestratorOptions {
  /** Defaults to `KubeConfig.loadFromDefault()`: $KUBECONFIG, ~/.kube/config, or the in-cluster service account. */
  kubeConfig?: KubeConfig;
  namespace: string;
  /** How long requestMachine / restartMachines / restartTask wait for replacements to be Running. */
  readyTimeoutMs?: number;
  pollIntervalMs?: number;
  /** Taint keys that announce a node's removal (kubernetes/disruption-notices.ts); default DEFAULT_NOTICE_TAINTS. */
  noticeTaints?: readonly string[];
}

/** The pod-deletion-cost range is int32; the minimum puts the released pod first in line. */
const LOWEST_DELETION_COST = String(-(2 ** 31));

/** What a scale-up has done, so a retry of the operation after a timed-out wait does not scale again. */
interface ScaleUpProgress {
  podsBefore: Set<string>;
}

/** What a release has done, so a retry of the operation after a timed-out wait does not scale down again. */
interface ReleaseProgress {
  released: PodRef;
}

/**
 * What a restart has done so far, kept so that a retry of the same operation finishes the deletions
 * and waits, instead of deleting the replacements that already came up.
 */
interface RestartProgress {
  podsBefore: Set<string>;
  expectedPerRole: Map<Role, number>;
  stillToDelete: PodRef[];
}

export class KubernetesOrchestrator implements Orchestrator, DepartureSource {
  readonly kind = 'kubernetes' as const;
  private readonly core: CoreV1Api;
  private readonly owners: PodOwners;
  private readonly namespace: string;
  private readonly readyTimeoutMs: number;
  private readonly pollIntervalMs: number;
  private readonly operations = new OperationMemo();
  private readonly restartProgress = new BoundedMap<string, RestartProgress>(MAX_REMEMBERED_OPERATIONS);
  /** Per isolated machine, the UIDs of the job's pods at isolation: whatever is not among them is new. */
  private readonly isolationBaselines = new BoundedMap<string, Set<string>>(MAX_REMEMBERED_OPERATIONS);
  /** Pods already handed out by requestMachine, so two replacements in one role/zone/class get distinct pods. */
  private readonly claimedPodUids = new BoundedMap<string, true>(MAX_REMEMBERED_OPERATIONS);
  private readonly scaleUpProgress = new BoundedMap<string, ScaleUpProgress>(MAX_REMEMBERED_OPERATIONS);
  private readonly releaseProgress = new BoundedMap<string, ReleaseProgress>(MAX_REMEMBERED_OPERATIONS);
  private readonly closing = new AbortController();
  /** Pods this adapter ended (isolated, restarted, released), by UID or `name:<pod>`: their end is no notice. */
  private readonly endedHere = new BoundedMap<string, true>(MAX_REMEMBERED_OPERATIONS);
  private readonly announced: KubernetesDepartures;

  constructor(options: KubernetesOrchestratorOptions) {
    let kubeConfig = options.kubeConfig;
    if (!kubeConfig) {
      kubeConfig = new KubeConfig();
      kubeConfig.loadFromDefault();
    }
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.namespace = options.namespace;
    this.readyTimeoutMs = options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS;
    this.pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.owners = new PodOwners(kubeConfig.makeApiClient(AppsV1Api), this.namespace, () => this.assertOpen());
    this.announced = new KubernetesDepartures({
      core: this.core,
      namespace: this.namespace,
      jobLabel: PodLabels.job,
      roleLabel: PodLabels.role,
      noticeTaints: options.noticeTaints ?? DEFAULT_NOTICE_TAINTS,
      causedHere: (pod) =>
        this.endedHere.has(pod.metadata?.uid ?? '') ||
        this.endedHere.has(`name:${pod.metadata?.name}`) ||
        !!pod.metadata?.annotations?.[PodAnnotations.releaseReason],
    });
  }

  /**
   * The adapter from the ROBUSTRL_K8S_* settings (orchestrator-settings.ts): the namespace (else the
   * kubeconfig context's, which in a pod is the service account's), the waits, and taint keys that announce
   * a node's removal besides DEFAULT_NOTICE_TAINTS.
   */
  static fromEnv(env: NodeJS.ProcessEnv = process.env, kubeConfig?: KubeConfig): KubernetesOrchestrator {
    if (!kubeConfig) {
      kubeConfig = new KubeConfig();
      kubeConfig.loadFromDefault();
    }
    const namespace = K8S_NAMESPACE.read(env) || kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace;
    if (!namespace) {
      throw new Error('ROBUSTRL_K8S_NAMESPACE is not set and the current kubeconfig context names no namespace');
    }
    return new KubernetesOrchestrator({
      kubeConfig,
      namespace,
      readyTimeoutMs: K8S_READY_TIMEOUT_MS.read(env),
      pollIntervalMs: K8S_POLL_INTERVAL_MS.read(env),
      noticeTaints: [...DEFAULT_NOTICE_TAINTS, ...K8S_NOTICE_TAINTS.read(env)],
    });
  }

  /** Departures the cluster announces for the namespace's job pods (the DepartureSource port, ../departures.ts). */
  departures(): Promise<Departure[]> {
    this.assertOpen();
    return this.announced.departures();
  }

  async listMachines(jobId: string): Promise<MachineSpec[]> {
    this.assertOpen();
    const pods = await this.listPods({ [PodLabels.job]: labelValue('job id', jobId) });
    return pods.filter(isLive).map((pod) => toMachineSpec(pod));
  }

  isolateMachine(request: { operationId: string; jobId: string; machineId: string; reason: string }): Promise<void> {
    return this.once(request.operationId, 'isolateMachine', async () => {
      const pods = await this.listPods({ [PodLabels.job]: labelValue('job id', request.jobId) });
      // Looked up within the job's pods, so a machine id that names another job's pod is "vanished", never deleted.
      const pod = pods.find((p) => p.metadata?.name === request.machineId);
      if (!pod) return;
      // Taken before the delete so that the owner's replacement can never be in it. A pod already being
      // deleted (evicted by a drain, docs/planned-failures.md) may have its replacement already: the
      // baseline is then the pods that existed before that deletion began.
      const deletionBegan = deletionStart(pod);
      const before = deletionBegan === null ? pods : pods.filter((p) => creationTime(p) < deletionBegan);
      this.isolationBaselines.set(isolationKey(request.jobId, request.machineId), new Set(before.map(podUid)));
      const nodeName = pod.spec?.nodeName;
      // Cordon first: once the pod is gone its replacement may be scheduled at once, and must not land here.
      if (nodeName) await this.cordonNode(nodeName, request);
      await this.deletePod(podRef(pod));
    });
  }

  /**
   * With `replaces`: waits for the owner's replacement of that (isolated) pod. Without: a scale-up —
   * finds the owner of the job's pods of that role/zone/class, patches its replicas + 1 (annotated
   * with the operation), and waits for the new pod to be Running.
   */
  requestMachine(request: { operationId: string; jobId: string; role: Role; zone: string; hardwareClass: string; replaces?: string }): Promise<MachineSpec> {
    return this.once(request.operationId, 'requestMachine', async () => {
      const selector = poolSelector(request);
      let podsBefore: Set<string>;
      if (request.replaces) {
        podsBefore = await this.podsExistingBefore(request, selector);
      } else {
        let progress = this.scaleUpProgress.get(request.operationId);
        if (!progress) {
          // Taken before the patch, so the pod the owner adds for it cannot be among them.
          const pods = await this.listPods(selector);
          const owner = await this.owners.ownerOfPool(request, pods);
          progress = { podsBefore: new Set(pods.map(podUid)) };
          await this.owners.scaleOwner(
            owner,
            +1,
            request.operationId,
            `scale up ${request.role} zone ${request.zone} hardware class ${request.hardwareClass} of job ${request.jobId}`,
          );
          this.scaleUpProgress.set(request.operationId, progress);
        }
        podsBefore = progress.podsBefore;
      }
      const what = `a new Running pod for job ${request.jobId} role ${request.role} zone ${request.zone} hardware class ${request.hardwareClass}${
        request.replaces ? ` replacing ${request.replaces}` : ' (scale-up)'
      } in namespace ${this.namespace}`;
      const pod = await this.waitFor(what, async () => {
        const candidates = (await this.listPods(selector))
          .filter((p) => isRunning(p) && !podsBefore.has(podUid(p)) && !this.claimedPodUids.has(podUid(p)))
          .sort((a, b) => creationTime(a) - creationTime(b));
        // Claimed in the same step that found it, so a concurrent request cannot take the same pod.
        if (candidates[0]) this.claimedPodUids.set(podUid(candidates[0]), true);
        return candidates[0];
      });
      this.scaleUpProgress.delete(request.operationId);
      return toMachineSpec(pod);
    });
  }

  /**
   * Scale-down by one, gracefully: the pod is deleted by its owner's controller with its normal grace
   * period, the node is not cordoned, nothing replaces it. A Deployment's pod gets the lowest
   * pod-deletion-cost first, so that the ReplicaSet removes that one. A StatefulSet always removes its
   * highest ordinal: that pod is released instead, and its name returned. A bare pod (no owner) is
   * simply deleted. A vanished or terminating pod is released already.
   */
  releaseMachine(request: { operationId: string; jobId: string; machineId: string; reason: string }): Promise<string> {
    return this.once(request.operationId, 'releaseMachine', async () => {
      const jobSelector = { [PodLabels.job]: labelValue('job id', request.jobId) };
      let progress = this.releaseProgress.get(request.operationId);
      if (!progress) {
        const pods = await this.listPods(jobSelector);
        // Within the job's pods, so a machine id that names another job's pod is "vanished", never touched.
        const pod = pods.find((p) => p.metadata?.name === request.machineId);
        if (!pod || !isLive(pod)) return request.machineId;
        progress = { released: await this.startRelease(pod, pods, request) };
        this.releaseProgress.set(request.operationId, progress);
      }
      const { released } = progress;
      await this.waitFor(`released pod ${this.namespace}/${released.name} to be gone`, async () => {
        const pods = await this.listPods(jobSelector);
        return pods.some((p) => p.metadata?.name === released.name && (released.uid === undefined || p.metadata?.uid === released.uid)) ? undefined : true;
      });
      this.releaseProgress.delete(request.operationId);
      return released.name;
    });
  }

  restartMachines(request: { operationId: string; jobId: string; machineIds: string[] }): Promise<void> {
    return this.once(request.operationId, 'restartMachines', () => {
      const names = new Set(request.machineIds);
      return this.restartPods(request.operationId, request.jobId, (pod) => names.has(pod.metadata?.name ?? ''));
    });
  }

  restartTask(request: { operationId: string; jobId: string }): Promise<void> {
    return this.once(request.operationId, 'restartTask', () => this.restartPods(request.operationId, request.jobId, () => true));
  }

  async close(): Promise<void> {
    this.closing.abort();
  }

  /**
   * Deletes the selected pods of the job and waits until, per role, as many new pods are Running as
   * were deleted. Counting per role rather than per name works for StatefulSets (same name, new UID)
   * and Deployments (new name) alike.
   */
  private async restartPods(operationId: string, jobId: string, selected: (pod: V1Pod) => boolean): Promise<void> {
    const jobSelector = { [PodLabels.job]: labelValue('job id', jobId) };
    let progress = this.restartProgress.get(operationId);
    if (!progress) {
      const pods = await this.listPods(jobSelector);
      const doomed = pods.filter((pod) => isLive(pod) && selected(pod));
      const expectedPerRole = new Map<Role, number>();
      for (const pod of doomed) {
        const role = toMachineSpec(pod).role;
        expectedPerRole.set(role, (expectedPerRole.get(role) ?? 0) + 1);
      }
      progress = { podsBefore: new Set(pods.map(podUid)), expectedPerRole, stillToDelete: doomed.map(podRef) };
      this.restartProgress.set(operationId, progress);
    }
    while (progress.stillToDelete.length > 0) {
      await this.deletePod(progress.stillToDelete[0]);
      progress.stillToDelete.shift();
    }
    const { podsBefore, expectedPerRole } = progress;
    if (expectedPerRole.size === 0) return;
    const expected = [...expectedPerRole].map(([role, n]) => `${n} ${role}`).join(', ');
    await this.waitFor(`replacements (${expected}) of the restarted pods of job ${jobId} in namespace ${this.namespace} to be Running`, async () => {
      const replacements = (await this.listPods(jobSelector)).filter((p) => isRunning(p) && !podsBefore.has(podUid(p)));
      const complete = [...expectedPerRole].every(([role, n]) => replacements.filter((p) => p.metadata?.labels?.[PodLabels.role] === role).length >= n);
      return complete ? true : undefined;
    });
    this.restartProgress.delete(operationId);
  }

  /**
   * The pods that do not count as "new" for requestMachine. Known exactly when this process isolated
   * `replaces`. Otherwise (no `replaces`, or isolated by an earlier incarnation of the controller) it
   * is what exists now — except a live pod named `replaces`: the old one was deleted, so that is a
   * StatefulSet's recreation. A Deployment's replacement that already exists in that case is not
   * recognised; see the README.
   */
  private async podsExistingBefore(request: { jobId: string; replaces?: string }, selector: Record<string, string>): Promise<Set<string>> {
    const baseline = request.replaces ? this.isolationBaselines.get(isolationKey(request.jobId, request.replaces)) : undefined;
    if (baseline) return baseline;
    const current = await this.listPods(selector);
    return new Set(current.filter((p) => !(request.replaces && p.metadata?.name === request.replaces && !isTerminating(p))).map(podUid));
  }

  /** Does the scale-down for releaseMachine and says which pod incarnation leaves. */
  private async startRelease(pod: V1Pod, jobPods: V1Pod[], request: { operationId: string; machineId: string; reason: string }): Promise<PodRef> {
    const reason = `release ${request.machineId}: ${request.reason}`.slice(0, MAX_REASON_LENGTH);
    const owner = await this.owners.ownerOfPod(pod);
    if (owner) this.owners.known.set(poolKey(toMachineSpec(pod), pod.metadata?.labels?.[PodLabels.job] ?? ''), owner);
    if (!owner) {
      // Nothing would recreate a bare pod: deleting it (with its grace period) is the scale-down.
      await this.deletePod(podRef(pod));
      return podRef(pod);
    }
    if (owner.kind === 'Deployment') {
      // Before the scale-down, so the ReplicaSet already ranks this pod first when it picks one. A pod
      // gone meanwhile is released already (its ReplicaSet replaces it, as after any deletion).
      const annotated = await this.patchPod(pod, {
        metadata: {
          annotations: {
            [PodAnnotations.deletionCost]: LOWEST_DELETION_COST,
            [PodAnnotations.operation]: request.operationId,
            [PodAnnotations.releaseReason]: reason,
          },
        },
      });
      if (annotated) await this.owners.scaleOwner(owner, -1, request.operationId, reason);
      return podRef(pod);
    }
    const scaled = await this.owners.scaleOwner(owner, -1, request.operationId, reason);
    // The ordinals are start..start+replicas-1; the scale-down removed the one at start+replicas.
    const start = (scaled.object as V1StatefulSet).spec?.ordinals?.start ?? 0;
    const name = `${owner.name}-${start + scaled.replicasAfter}`;
    // Its UID as listed before the patch; without one (a concurrent change) the wait goes by name, which a
    // scaled-down StatefulSet does not reuse.
    const released = { name, uid: jobPods.find((p) => p.metadata?.name === name)?.metadata?.uid };
    this.endedHere.set(released.uid ?? `name:${name}`, true);
    return released;
  }

  /** False when the pod no longer exists. */
  private async patchPod(pod: V1Pod, patch: object): Promise<boolean> {
    const name = pod.metadata?.name ?? '';
    try {
      await this.core.patchNamespacedPod(name, this.namespace, patch, undefined, undefined, undefined, undefined, undefined, {
        headers: { 'Content-Type': PatchUtils.PATCH_FORMAT_JSON_MERGE_PATCH },
      });
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return false;
      throw toOrchestratorError(error, `annotate pod ${this.namespace}/${name}`);
    }
  }

  private async cordonNode(nodeName: string, request: { operationId: string; jobId: string; machineId: string; reason: string }): Promise<void> {
    const patch = {
      metadata: {
        annotations: {
          [NodeAnnotations.operation]: request.operationId,
          [NodeAnnotations.isolatedMachine]: `${this.namespace}/${request.machineId}`,
          [NodeAnnotations.isolationReason]: request.reason.slice(0, MAX_REASON_LENGTH),
        },
      },
      spec: { unschedulable: true },
    };
    try {
      // client-node sends PATCH as application/json unless told otherwise, which the API server refuses (415).
      await this.core.patchNode(nodeName, patch, undefined, undefined, undefined, undefined, undefined, {
        headers: { 'Content-Type': PatchUtils.PATCH_FORMAT_JSON_MERGE_PATCH },
      });
    } catch (error) {
      // A node that no longer exists cannot take new work either.
      if (statusOf(error) === 404) return;
      throw toOrchestratorError(error, `cordon node ${nodeName}`);
    }
  }

  /**
   * Deletes that incarnation of the pod only: the UID precondition keeps a retry from deleting a
   * StatefulSet's replacement, which has the same name. 404 and a failed precondition (409) both mean
   * the incarnation is already gone.
   */
  private async deletePod(pod: PodRef): Promise<void> {
    this.endedHere.set(pod.uid ?? `name:${pod.name}`, true);
    try {
      await this.core.deleteNamespacedPod(
        pod.name,
        this.namespace,
        undefined,
        undefined,
        undefined,
        undefined,
        undefined,
        pod.uid ? { preconditions: { uid: pod.uid } } : undefined,
      );
    } catch (error) {
      const status = statusOf(error);
      if (status === 404 || (status === 409 && isPreconditionFailure(error))) return;
      throw toOrchestratorError(error, `delete pod ${this.namespace}/${pod.name}`);
    }
  }

  private async listPods(labels: Record<string, string>): Promise<V1Pod[]> {
    const labelSelector = Object.entries(labels)
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    try {
      const { body } = await this.core.listNamespacedPod(this.namespace, undefined, undefined, undefined, undefined, labelSelector);
      return body.items;
    } catch (error) {
      throw toOrchestratorError(error, `list pods in namespace ${this.namespace} with labels ${labelSelector}`);
    }
  }

  /**
   * Polls `check` until it yields a value. A retriable API error while polling is ridden out (the wait
   * is bounded anyway); a non-retriable one ends the wait at once.
   */
  private async waitFor<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
    const deadline = Date.now() + this.readyTimeoutMs;
    let lastError: OrchestratorError | undefined;
    for (;;) {
      this.assertOpen();
      try {
        const found = await check();
        if (found !== undefined) return found;
        lastError = undefined;
      } catch (error) {
        if (!(error instanceof OrchestratorError) || !error.retriable) throw error;
        lastError = error;
      }
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        throw new OrchestratorError(
          `timed out after ${this.readyTimeoutMs} ms waiting for ${what}${lastError ? ` (last error: ${lastError.message})` : ''}`,
          true,
          { cause: lastError },
        );
      }
      await sleep(Math.min(this.pollIntervalMs, remaining), this.closing.signal);
    }
  }

  /** At most once per operationId (see OperationMemo); refused once the adapter is closed. */
  private async once<T>(operationId: string, kind: OperationKind, run: () => Promise<T>): Promise<T> {
    this.assertOpen();
    return this.operations.once(operationId, kind, run);
  }

  private assertOpen(): void {
    if (this.closing.signal.aborted) throw new OrchestratorError('the Kubernetes orchestrator is closed', false);
  }
}
