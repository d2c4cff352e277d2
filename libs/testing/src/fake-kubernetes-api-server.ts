import { randomUUID } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import {
  LabelRequirement,
  parseLabelSelector,
  matches,
  mergePatch,
  patchRefusal,
  compareRanks,
  workloadKey,
  podKey,
  readBody,
  sendJson,
  sendStatus,
  reasonFor,
} from './fake-kubernetes-http';
import {
  OwnerKind,
  FakePod,
  WorkloadKind,
  FakeWorkload,
  POD_DELETION_COST_ANNOTATION,
  FakeNode,
  RecordedRequest,
  InjectedFailure,
  FakeApiServerOptions,
  ZONE_NODE_LABEL,
  WORKLOAD_RESOURCES,
} from './fake-kubernetes-objects';

export * from './fake-kubernetes-objects';

/**
 * Test support: an in-process stand-in for the Kubernetes API server, with just the routes the
 * Kubernetes orchestrator uses, plus a simulated owner controller (StatefulSet / ReplicaSet) so that
 * deleting a pod makes a replacement appear the way it does in a cluster. Owners registered with
 * `addDeployment` / `addStatefulSet` are served under apps/v1 (GET and merge PATCH, with the
 * resourceVersion in a patch checked as a precondition, 409 when stale) and their controller honours
 * `spec.replicas`: scaling up creates pods, scaling down deletes the pod with the lowest
 * `controller.kubernetes.io/pod-deletion-cost` (a ReplicaSet) or the highest ordinal (a StatefulSet).
 * Pods whose owner is not registered are simply recreated when deleted. Not exported from the
 * package index: production code has no business importing it.
 *
 * Where the real API server is strict in a way a client can get wrong, this one is strict too: a
 * PATCH with `Content-Type: application/json` is refused with 415 (client-node sends that unless told
 * otherwise), and requests without the expected bearer token get 401.
 *
 * Objects are kept in their JSON wire form so that what the adapter reads is exactly what
 * client-node deserialises from a real server.
 */

export class FakeKubernetesApiServer {
  readonly requests: RecordedRequest[] = [];
  private readonly pods = new Map<string, FakePod>();
  private readonly nodes = new Map<string, FakeNode>();
  private readonly workloads = new Map<string, FakeWorkload>();
  /** Pod UID → creation sequence: orders pods created within the same millisecond. */
  private readonly creationSequence = new Map<string, number>();
  private readonly failures: InjectedFailure[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private resourceVersion = 1;
  private replacementCounter = 0;

  private constructor(
    private readonly server: Server,
    private readonly options: Required<FakeApiServerOptions>,
  ) {}

  static async start(options: FakeApiServerOptions = {}): Promise<FakeKubernetesApiServer> {
    const resolved: Required<FakeApiServerOptions> = {
      token: options.token ?? 'fake-token',
      replacementDelayMs: options.replacementDelayMs ?? 20,
      runningDelayMs: options.runningDelayMs ?? 30,
      terminationMs: options.terminationMs ?? 0,
      podsPerNode: options.podsPerNode ?? 1,
    };
    const server = createServer();
    const fake = new FakeKubernetesApiServer(server, resolved);
    server.on('request', (req, res) => fake.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return fake;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** A KubeConfig whose current context talks to this server with its bearer token. */
  kubeConfig(namespace?: string): KubeConfig {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'fake', server: `http://127.0.0.1:${this.port}`, skipTLSVerify: true }],
      users: [{ name: 'fake-user', token: this.options.token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'fake-user', namespace }],
      currentContext: 'fake',
    });
    return kubeConfig;
  }

  addNode(name: string, options: { zone?: string; unschedulable?: boolean } = {}): FakeNode {
    const node: FakeNode = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name, uid: randomUUID(), resourceVersion: this.nextResourceVersion(), labels: options.zone ? { [ZONE_NODE_LABEL]: options.zone } : {} },
      spec: options.unschedulable ? { unschedulable: true } : {},
    };
    this.nodes.set(name, node);
    this.schedulePendingPods();
    return node;
  }

  addPod(pod: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    nodeName?: string;
    phase?: FakePod['status']['phase'];
    owner?: { kind: OwnerKind; name: string };
  }): FakePod {
    const created: FakePod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: pod.name,
        namespace: pod.namespace,
        uid: randomUUID(),
        resourceVersion: this.nextResourceVersion(),
        creationTimestamp: new Date().toISOString(),
        labels: { ...pod.labels },
        ownerReferences: pod.owner
          ? [{ apiVersion: 'apps/v1', kind: pod.owner.kind, name: pod.owner.name, uid: `owner-${pod.owner.name}`, controller: true }]
          : undefined,
      },
      spec: { nodeName: pod.nodeName, containers: [{ name: 'role', image: 'robustrl/role:test' }] },
      status: { phase: pod.phase ?? (pod.nodeName ? 'Running' : 'Pending') },
    };
    this.pods.set(podKey(pod.namespace, pod.name), created);
    this.creationSequence.set(created.metadata.uid, this.creationSequence.size);
    return created;
  }

  /**
   * A Deployment and the one ReplicaSet it owns (named `replicaSetName`); its pods are added with
   * `addPod({ owner: { kind: 'ReplicaSet', name: replicaSetName } })`. `replicas` should match them:
   * the controller acts only when the replicas change or one of its pods goes.
   */
  addDeployment(options: { name: string; namespace: string; replicaSetName: string; replicas: number; podLabels: Record<string, string> }): FakeWorkload {
    const deployment = this.putWorkload('Deployment', options.namespace, options.name, options.replicas, options.podLabels);
    this.putWorkload('ReplicaSet', options.namespace, options.replicaSetName, options.replicas, options.podLabels, deployment);
    return deployment;
  }

  /** A StatefulSet; its pods (`<name>-<ordinal>`) are added with `addPod({ owner: { kind: 'StatefulSet', name } })`. */
  addStatefulSet(options: { name: string; namespace: string; replicas: number; podLabels: Record<string, string> }): FakeWorkload {
    return this.putWorkload('StatefulSet', options.namespace, options.name, options.replicas, options.podLabels);
  }

  workload(kind: WorkloadKind, namespace: string, name: string): FakeWorkload | undefined {
    return this.workloads.get(workloadKey(kind, namespace, name));
  }

  pod(namespace: string, name: string): FakePod | undefined {
    return this.pods.get(podKey(namespace, name));
  }

  listPods(namespace: string): FakePod[] {
    return [...this.pods.values()].filter((p) => p.metadata.namespace === namespace);
  }

  node(name: string): FakeNode | undefined {
    return this.nodes.get(name);
  }

  /** Make matching requests fail with `status` (a Kubernetes Status body), e.g. to simulate RBAC denials. */
  failRequests(failure: InjectedFailure): void {
    this.failures.push({ ...failure });
  }

  requestsMatching(method: string, path: RegExp): RecordedRequest[] {
    return this.requests.filter((r) => r.method === method && path.test(r.path));
  }

  clearRequests(): void {
    this.requests.length = 0;
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    // Node's global agent keeps connections alive; without this, close() waits for them to time out.
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await readBody(req);
    const contentType = req.headers['content-type']?.split(';')[0].trim();
    let body: unknown;
    if (raw.length > 0) {
      try {
        body = JSON.parse(raw);
      } catch {
        return sendStatus(res, 400, 'BadRequest', 'request body is not JSON');
      }
    }
    const method = req.method ?? 'GET';
    this.requests.push({ method, path: url.pathname, query: Object.fromEntries(url.searchParams), contentType, body });

    if (req.headers.authorization !== `Bearer ${this.options.token}`) return sendStatus(res, 401, 'Unauthorized', 'Unauthorized');

    const failure = this.failures.find((f) => (f.method === undefined || f.method === method) && (f.path === undefined || f.path.test(url.pathname)));
    if (failure) {
      if (failure.times !== undefined && --failure.times <= 0) this.failures.splice(this.failures.indexOf(failure), 1);
      return sendStatus(res, failure.status, reasonFor(failure.status), failure.message ?? `injected failure for ${method} ${url.pathname}`);
    }

    const podList = url.pathname.match(/^\/api\/v1\/namespaces\/([^/]+)\/pods$/);
    const podItem = url.pathname.match(/^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)$/);
    const nodeItem = url.pathname.match(/^\/api\/v1\/nodes\/([^/]+)$/);
    const workloadItem = url.pathname.match(/^\/apis\/apps\/v1\/namespaces\/([^/]+)\/(deployments|replicasets|statefulsets)\/([^/]+)$/);

    if (podList && method === 'GET') {
      let selector: LabelRequirement[];
      try {
        selector = parseLabelSelector(url.searchParams.get('labelSelector') ?? '');
      } catch (error) {
        return sendStatus(res, 400, 'BadRequest', (error as Error).message);
      }
      const items = this.listPods(decodeURIComponent(podList[1])).filter((p) => matches(selector, p.metadata.labels));
      return sendJson(res, 200, { apiVersion: 'v1', kind: 'PodList', metadata: { resourceVersion: String(this.resourceVersion) }, items });
    }
    if (podItem) {
      const [namespace, name] = [decodeURIComponent(podItem[1]), decodeURIComponent(podItem[2])];
      const pod = this.pod(namespace, name);
      if (!pod) return sendStatus(res, 404, 'NotFound', `pods "${name}" not found`);
      if (method === 'GET') return sendJson(res, 200, pod);
      if (method === 'PATCH') {
        const refusal = patchRefusal('pods', name, pod.metadata.resourceVersion, contentType, body);
        if (refusal) return sendStatus(res, ...refusal);
        const patched = mergePatch(pod, body) as FakePod;
        // Only metadata (annotations, labels) is patchable here; identity and status stay the server's.
        pod.metadata = {
          ...patched.metadata,
          name: pod.metadata.name,
          namespace: pod.metadata.namespace,
          uid: pod.metadata.uid,
          resourceVersion: this.nextResourceVersion(),
        };
        return sendJson(res, 200, pod);
      }
      if (method === 'DELETE') {
        const preconditionUid = (body as { preconditions?: { uid?: string } } | undefined)?.preconditions?.uid;
        if (preconditionUid !== undefined && preconditionUid !== pod.metadata.uid) {
          return sendStatus(
            res,
            409,
            'Conflict',
            `Operation cannot be fulfilled on pods "${name}": Precondition failed: UID in precondition: ${preconditionUid}, UID in object meta: ${pod.metadata.uid}`,
          );
        }
        return sendJson(res, 200, this.deletePod(pod));
      }
    }
    if (workloadItem) {
      const [namespace, kind, name] = [decodeURIComponent(workloadItem[1]), WORKLOAD_RESOURCES[workloadItem[2]], decodeURIComponent(workloadItem[3])];
      const workload = this.workload(kind, namespace, name);
      if (!workload) return sendStatus(res, 404, 'NotFound', `${workloadItem[2]}.apps "${name}" not found`);
      if (method === 'GET') return sendJson(res, 200, workload);
      if (method === 'PATCH') {
        const refusal = patchRefusal(`${workloadItem[2]}.apps`, name, workload.metadata.resourceVersion, contentType, body);
        if (refusal) return sendStatus(res, ...refusal);
        const patched = mergePatch(workload, body) as FakeWorkload;
        patched.apiVersion = 'apps/v1';
        patched.kind = kind;
        patched.metadata = { ...patched.metadata, name, namespace, uid: workload.metadata.uid, resourceVersion: this.nextResourceVersion() };
        this.workloads.set(workloadKey(kind, namespace, name), patched);
        if (patched.spec.replicas !== workload.spec.replicas) this.later(this.options.replacementDelayMs, () => this.scaled(patched));
        return sendJson(res, 200, patched);
      }
    }
    if (nodeItem) {
      const name = decodeURIComponent(nodeItem[1]);
      const node = this.nodes.get(name);
      if (!node) return sendStatus(res, 404, 'NotFound', `nodes "${name}" not found`);
      if (method === 'GET') return sendJson(res, 200, node);
      if (method === 'PATCH') {
        if (contentType !== 'application/merge-patch+json' && contentType !== 'application/strategic-merge-patch+json') {
          return sendStatus(
            res,
            415,
            'UnsupportedMediaType',
            `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
          );
        }
        // For the fields this fake knows (maps and scalars), a strategic merge patch is a merge patch.
        const patched = mergePatch(node, body) as FakeNode;
        patched.metadata.name = node.metadata.name;
        patched.metadata.uid = node.metadata.uid;
        patched.metadata.resourceVersion = this.nextResourceVersion();
        this.nodes.set(name, patched);
        this.schedulePendingPods();
        return sendJson(res, 200, patched);
      }
    }
    return sendStatus(res, 404, 'NotFound', `the server could not find the requested resource (${method} ${url.pathname})`);
  }

  private deletePod(pod: FakePod): FakePod {
    const key = podKey(pod.metadata.namespace, pod.metadata.name);
    if (pod.metadata.deletionTimestamp) return pod;
    pod.metadata.deletionTimestamp = new Date().toISOString();
    pod.metadata.resourceVersion = this.nextResourceVersion();
    const owner = pod.metadata.ownerReferences?.find((o) => o.controller);
    const removeAndReplace = () => {
      if (this.pods.get(key) === pod) this.pods.delete(key);
      if (!owner) return;
      const workload = this.workload(owner.kind as WorkloadKind, pod.metadata.namespace, owner.name);
      this.later(this.options.replacementDelayMs, () =>
        workload ? this.reconcile(workload) : this.createReplacement(pod, owner.kind as OwnerKind, owner.name),
      );
    };
    if (this.options.terminationMs > 0) this.later(this.options.terminationMs, removeAndReplace);
    else removeAndReplace();
    return pod;
  }

  /**
   * What the owner controller does: a StatefulSet recreates the pod under the same name (after the old
   * one is gone, which is why replacement waits for removal); a ReplicaSet (a Deployment's pods) makes
   * one under a new generated name.
   */
  private createReplacement(old: FakePod, ownerKind: OwnerKind, ownerName: string): void {
    const name = ownerKind === 'StatefulSet' ? old.metadata.name : `${ownerName}-r${++this.replacementCounter}`;
    if (this.pods.has(podKey(old.metadata.namespace, name))) return;
    this.addPod({ name, namespace: old.metadata.namespace, labels: old.metadata.labels, owner: { kind: ownerKind, name: ownerName } });
    this.schedulePendingPods();
  }

  /** A Deployment passes its replicas on to its ReplicaSet; the others reconcile their own pods. */
  private scaled(workload: FakeWorkload): void {
    const current = this.workload(workload.kind, workload.metadata.namespace, workload.metadata.name);
    if (!current) return;
    if (current.kind !== 'Deployment') return this.reconcile(current);
    const replicaSets = [...this.workloads.values()].filter(
      (w) => w.kind === 'ReplicaSet' && w.metadata.ownerReferences?.some((o) => o.controller && o.kind === 'Deployment' && o.name === current.metadata.name),
    );
    for (const replicaSet of replicaSets) {
      replicaSet.spec.replicas = current.spec.replicas;
      replicaSet.metadata.resourceVersion = this.nextResourceVersion();
      this.reconcile(replicaSet);
    }
  }

  /**
   * The owner controller honouring `spec.replicas`. A ReplicaSet creates pods under new names, and
   * deletes the surplus lowest pod-deletion-cost first (after unscheduled and not-Running pods, as
   * the real one does; newest first among equals). A StatefulSet keeps ordinals start..start+replicas-1:
   * it recreates a missing one (once the old pod is gone) and deletes those above.
   */
  private reconcile(workload: FakeWorkload): void {
    if (workload.kind === 'Deployment') return;
    const { namespace, name } = workload.metadata;
    const owned = this.listPods(namespace).filter((p) => p.metadata.ownerReferences?.some((o) => o.controller && o.kind === workload.kind && o.name === name));
    const live = owned.filter((p) => !p.metadata.deletionTimestamp);
    const create = (podName: string) =>
      this.addPod({ name: podName, namespace, labels: workload.spec.template.metadata.labels, owner: { kind: workload.kind as OwnerKind, name } });
    if (workload.kind === 'StatefulSet') {
      const start = workload.spec.ordinals?.start ?? 0;
      const ordinalOf = (pod: FakePod) => Number(pod.metadata.name.slice(name.length + 1));
      for (const pod of live) if (ordinalOf(pod) >= start + workload.spec.replicas) this.deletePod(pod);
      for (let ordinal = start; ordinal < start + workload.spec.replicas; ordinal++) {
        if (!this.pods.has(podKey(namespace, `${name}-${ordinal}`))) create(`${name}-${ordinal}`);
      }
    } else {
      for (let missing = workload.spec.replicas - live.length; missing > 0; missing--) create(`${name}-s${++this.replacementCounter}`);
      const rank = (pod: FakePod) => [
        pod.spec.nodeName ? 1 : 0,
        pod.status.phase === 'Running' ? 1 : 0,
        Number(pod.metadata.annotations?.[POD_DELETION_COST_ANNOTATION] ?? 0),
      ];
      const surplus = [...live]
        .sort((a, b) => compareRanks(rank(a), rank(b)) || this.creationOrder(b) - this.creationOrder(a))
        .slice(0, Math.max(0, live.length - workload.spec.replicas));
      for (const pod of surplus) this.deletePod(pod);
    }
    this.schedulePendingPods();
  }

  private creationOrder(pod: FakePod): number {
    return this.creationSequence.get(pod.metadata.uid) ?? 0;
  }

  private putWorkload(
    kind: WorkloadKind,
    namespace: string,
    name: string,
    replicas: number,
    podLabels: Record<string, string>,
    owner?: FakeWorkload,
  ): FakeWorkload {
    const workload: FakeWorkload = {
      apiVersion: 'apps/v1',
      kind,
      metadata: {
        name,
        namespace,
        uid: `owner-${name}`,
        resourceVersion: this.nextResourceVersion(),
        ownerReferences: owner
          ? [{ apiVersion: 'apps/v1', kind: owner.kind, name: owner.metadata.name, uid: owner.metadata.uid, controller: true }]
          : undefined,
      },
      spec: { replicas, template: { metadata: { labels: { ...podLabels } } } },
    };
    this.workloads.set(workloadKey(kind, namespace, name), workload);
    return workload;
  }

  /**
   * The scheduler: never onto a cordoned or full node (a terminating pod still holds its place);
   * within the pod's zone when nodes carry zones; least loaded first.
   */
  private schedulePendingPods(): void {
    for (const pod of this.pods.values()) {
      if (pod.spec.nodeName || pod.metadata.deletionTimestamp) continue;
      const zone = pod.metadata.labels['robustrl.io/zone'];
      const candidates = [...this.nodes.values()]
        .filter((n) => !n.spec.unschedulable)
        .filter((n) => zone === undefined || n.metadata.labels[ZONE_NODE_LABEL] === undefined || n.metadata.labels[ZONE_NODE_LABEL] === zone)
        .map((n) => ({ node: n, load: [...this.pods.values()].filter((p) => p.spec.nodeName === n.metadata.name).length }))
        .filter((c) => c.load < this.options.podsPerNode)
        .sort((a, b) => a.load - b.load || a.node.metadata.name.localeCompare(b.node.metadata.name));
      if (candidates.length === 0) continue;
      pod.spec.nodeName = candidates[0].node.metadata.name;
      pod.metadata.resourceVersion = this.nextResourceVersion();
      this.later(this.options.runningDelayMs, () => {
        if (!pod.metadata.deletionTimestamp) {
          pod.status.phase = 'Running';
          pod.metadata.resourceVersion = this.nextResourceVersion();
        }
      });
    }
  }

  private later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
  }

  private nextResourceVersion(): string {
    return String(++this.resourceVersion);
  }
}
