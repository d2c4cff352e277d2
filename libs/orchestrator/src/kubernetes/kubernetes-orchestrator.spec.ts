import { OrchestratorError } from '../orchestrator';
import { FakeKubernetesApiServer, OwnerKind } from '@robustrl/testing/fake-kubernetes-api-server';
import { KubernetesOrchestrator, NodeAnnotations, OwnerAnnotations, PodAnnotations, PodLabels } from './kubernetes-orchestrator';
import { rejectionOf } from '@robustrl/testing/rejection';

const NAMESPACE = 'rl';

// One job with a StatefulSet trainer and two Deployment rollout pods, each on its own node, plus a
// spare node (where replacements go) and another job's pod that must never be touched. The owners are
// registered, so their simulated controllers honour replicas.
async function startCluster(options: { readyTimeoutMs?: number } = {}) {
  const fake = await FakeKubernetesApiServer.start({ replacementDelayMs: 10, runningDelayMs: 20 });
  for (const node of ['node-1', 'node-2', 'node-3', 'node-4', 'node-spare']) fake.addNode(node, { zone: 'zone-a' });
  const labels = (job: string, role: string) => ({
    [PodLabels.job]: job,
    [PodLabels.role]: role,
    [PodLabels.zone]: 'zone-a',
    [PodLabels.hardwareClass]: 'h100',
  });
  const pod = (name: string, job: string, role: string, nodeName: string, owner: { kind: OwnerKind; name: string }) =>
    fake.addPod({ name, namespace: NAMESPACE, nodeName, owner, labels: labels(job, role) });
  fake.addStatefulSet({ name: 'job-1-trainer', namespace: NAMESPACE, replicas: 1, podLabels: labels('job-1', 'trainer') });
  fake.addDeployment({ name: 'job-1-rollout', replicaSetName: 'job-1-rollout-5c8d', namespace: NAMESPACE, replicas: 2, podLabels: labels('job-1', 'rollout') });
  fake.addDeployment({ name: 'job-2-rollout', replicaSetName: 'job-2-rollout-77f4', namespace: NAMESPACE, replicas: 1, podLabels: labels('job-2', 'rollout') });
  pod('job-1-trainer-0', 'job-1', 'trainer', 'node-1', { kind: 'StatefulSet', name: 'job-1-trainer' });
  pod('job-1-rollout-a', 'job-1', 'rollout', 'node-2', { kind: 'ReplicaSet', name: 'job-1-rollout-5c8d' });
  pod('job-1-rollout-b', 'job-1', 'rollout', 'node-3', { kind: 'ReplicaSet', name: 'job-1-rollout-5c8d' });
  pod('job-2-rollout-a', 'job-2', 'rollout', 'node-4', { kind: 'ReplicaSet', name: 'job-2-rollout-77f4' });
  const orchestrator = new KubernetesOrchestrator({
    kubeConfig: fake.kubeConfig(),
    namespace: NAMESPACE,
    readyTimeoutMs: options.readyTimeoutMs ?? 1_500,
    pollIntervalMs: 10,
  });
  return { fake, orchestrator };
}

const rejection = (promise: Promise<unknown>) => rejectionOf(promise, OrchestratorError);

describe('KubernetesOrchestrator', () => {
  let fake: FakeKubernetesApiServer;
  let orchestrator: KubernetesOrchestrator;

  beforeEach(async () => {
    ({ fake, orchestrator } = await startCluster());
  });

  afterEach(async () => {
    await orchestrator.close();
    await fake.close();
  });

  describe('listMachines', () => {
    it("maps the job's pods to machines by their labels, with the pod name as machine id", async () => {
      const machines = await orchestrator.listMachines('job-1');

      expect(machines.sort((a, b) => a.machineId.localeCompare(b.machineId))).toEqual([
        { machineId: 'job-1-rollout-a', role: 'rollout', zone: 'zone-a', hardwareClass: 'h100' },
        { machineId: 'job-1-rollout-b', role: 'rollout', zone: 'zone-a', hardwareClass: 'h100' },
        { machineId: 'job-1-trainer-0', role: 'trainer', zone: 'zone-a', hardwareClass: 'h100' },
      ]);
      const [list] = fake.requestsMatching('GET', /\/namespaces\/rl\/pods$/);
      expect(list.query.labelSelector).toBe('robustrl.io/job=job-1');
    });

    it('leaves out terminating and evicted (Failed) pods', async () => {
      fake.pod(NAMESPACE, 'job-1-rollout-b')!.metadata.deletionTimestamp = new Date().toISOString();
      fake.pod(NAMESPACE, 'job-1-rollout-a')!.status.phase = 'Failed';

      const machines = await orchestrator.listMachines('job-1');

      expect(machines.map((m) => m.machineId)).toEqual(['job-1-trainer-0']);
    });

    it('refuses a mislabelled pod instead of hiding it', async () => {
      fake.pod(NAMESPACE, 'job-1-rollout-a')!.metadata.labels[PodLabels.role] = 'generator';

      const error = await rejection(orchestrator.listMachines('job-1'));

      expect(error.retriable).toBe(false);
      expect(error.message).toContain('rl/job-1-rollout-a');
      expect(error.message).toContain(PodLabels.role);
    });

    it('refuses a job id that cannot be a label value, without calling the API', async () => {
      const error = await rejection(orchestrator.listMachines('job 1/with spaces'));

      expect(error.retriable).toBe(false);
      expect(fake.requests).toHaveLength(0);
    });
  });

  describe('isolateMachine', () => {
    const isolation = { operationId: 'op-isolate', jobId: 'job-1', machineId: 'job-1-rollout-a', reason: 'xid 79: GPU fell off the bus' };

    it('cordons the node with a merge patch before deleting that pod incarnation', async () => {
      const uid = fake.pod(NAMESPACE, 'job-1-rollout-a')!.metadata.uid;

      await orchestrator.isolateMachine(isolation);

      const node = fake.node('node-2')!;
      expect(node.spec.unschedulable).toBe(true);
      expect(node.metadata.annotations).toEqual({
        [NodeAnnotations.operation]: 'op-isolate',
        [NodeAnnotations.isolatedMachine]: 'rl/job-1-rollout-a',
        [NodeAnnotations.isolationReason]: 'xid 79: GPU fell off the bus',
      });
      const writes = fake.requests.filter((r) => r.method !== 'GET');
      expect(writes.map((r) => `${r.method} ${r.path}`)).toEqual(['PATCH /api/v1/nodes/node-2', 'DELETE /api/v1/namespaces/rl/pods/job-1-rollout-a']);
      expect(writes[0].contentType).toBe('application/merge-patch+json');
      expect(writes[1].body).toMatchObject({ preconditions: { uid } });
      expect(fake.pod(NAMESPACE, 'job-1-rollout-a')).toBeUndefined();
      expect(fake.node('node-3')!.spec.unschedulable).toBeUndefined();
    });

    it('does nothing more when the same operation is delivered again', async () => {
      await orchestrator.isolateMachine(isolation);
      fake.clearRequests();

      await orchestrator.isolateMachine(isolation);

      expect(fake.requests).toHaveLength(0);
    });

    it('succeeds for a machine that has vanished, touching nothing', async () => {
      await orchestrator.isolateMachine({ ...isolation, operationId: 'op-2', machineId: 'job-1-rollout-gone' });

      expect(fake.requests.map((r) => r.method)).toEqual(['GET']);
    });

    it("does not delete another job's pod of that name", async () => {
      await orchestrator.isolateMachine({ ...isolation, machineId: 'job-2-rollout-a' });

      expect(fake.pod(NAMESPACE, 'job-2-rollout-a')).toBeDefined();
      expect(fake.node('node-4')!.spec.unschedulable).toBeUndefined();
    });

    it('treats a pod deleted between list and delete (404) as isolated', async () => {
      fake.failRequests({ method: 'DELETE', status: 404, times: 1 });

      await expect(orchestrator.isolateMachine(isolation)).resolves.toBeUndefined();
    });

    it('reports a forbidden cordon as non-retriable, naming the node, and leaves the pod alone', async () => {
      fake.failRequests({ method: 'PATCH', path: /\/nodes\//, status: 403, message: 'nodes "node-2" is forbidden: User cannot patch resource "nodes"' });

      const error = await rejection(orchestrator.isolateMachine(isolation));

      expect(error.retriable).toBe(false);
      expect(error.message).toMatch(/cordon node node-2 failed with HTTP 403: nodes "node-2" is forbidden/);
      expect(fake.pod(NAMESPACE, 'job-1-rollout-a')).toBeDefined();
    });

    it('reports 409, 429 and 5xx as retriable, and 401 and 422 as not', async () => {
      const cases: Array<[number, boolean]> = [
        [409, true],
        [429, true],
        [500, true],
        [503, true],
        [401, false],
        [422, false],
      ];
      for (const [status, retriable] of cases) {
        fake.failRequests({ method: 'PATCH', status, times: 1 });
        const error = await rejection(orchestrator.isolateMachine({ ...isolation, operationId: `op-${status}` }));
        expect([status, error.retriable]).toEqual([status, retriable]);
        expect(error.message).toContain(`HTTP ${status}`);
      }
    });

    it('reports an unreachable API server as retriable', async () => {
      const stopped = fake;
      const unreachable = new KubernetesOrchestrator({ kubeConfig: stopped.kubeConfig(), namespace: NAMESPACE });
      // Started before the other one stops, so it cannot take over that port; afterEach closes it.
      fake = await FakeKubernetesApiServer.start();
      await stopped.close();

      const error = await rejection(unreachable.isolateMachine(isolation));

      expect(error.retriable).toBe(true);
      expect(error.message).toMatch(/unreachable \(ECONNREFUSED\)/);
    });
  });

  describe('requestMachine', () => {
    const request = { jobId: 'job-1', role: 'rollout' as const, zone: 'zone-a', hardwareClass: 'h100' };

    it("returns the owner's replacement of an isolated Deployment pod, on an uncordoned node", async () => {
      await orchestrator.isolateMachine({ operationId: 'op-isolate', jobId: 'job-1', machineId: 'job-1-rollout-a', reason: 'ecc' });

      const machine = await orchestrator.requestMachine({ ...request, operationId: 'op-request', replaces: 'job-1-rollout-a' });

      expect(machine).toMatchObject({ role: 'rollout', zone: 'zone-a', hardwareClass: 'h100' });
      expect(['job-1-rollout-a', 'job-1-rollout-b']).not.toContain(machine.machineId);
      const pod = fake.pod(NAMESPACE, machine.machineId)!;
      expect(pod.status.phase).toBe('Running');
      expect(pod.spec.nodeName).not.toBe('node-2');
      expect(fake.node(pod.spec.nodeName!)!.spec.unschedulable).toBeUndefined();
    });

    it('returns the replacement the owner made before the isolation, for a pod a drain was already deleting', async () => {
      // Evicted with a 30 s grace: the ReplicaSet replaced it at once, before the controller isolated it.
      await new Promise((r) => setTimeout(r, 5));
      const evicted = fake.pod(NAMESPACE, 'job-1-rollout-a')!;
      evicted.metadata.deletionTimestamp = new Date(Date.now() + 30_000).toISOString();
      evicted.metadata.deletionGracePeriodSeconds = 30;
      await new Promise((r) => setTimeout(r, 5));
      fake.addPod({
        name: 'job-1-rollout-c',
        namespace: NAMESPACE,
        nodeName: 'node-spare',
        owner: { kind: 'ReplicaSet', name: 'job-1-rollout-5c8d' },
        labels: { ...evicted.metadata.labels },
      });
      await orchestrator.isolateMachine({ operationId: 'op-isolate', jobId: 'job-1', machineId: 'job-1-rollout-a', reason: 'drained' });

      const machine = await orchestrator.requestMachine({ ...request, operationId: 'op-request', replaces: 'job-1-rollout-a' });

      expect(machine.machineId).toBe('job-1-rollout-c');
    });

    it('recognises a StatefulSet replacement, which keeps the name, by its new UID', async () => {
      const oldUid = fake.pod(NAMESPACE, 'job-1-trainer-0')!.metadata.uid;
      await orchestrator.isolateMachine({ operationId: 'op-isolate', jobId: 'job-1', machineId: 'job-1-trainer-0', reason: 'ecc' });

      const machine = await orchestrator.requestMachine({ ...request, role: 'trainer', operationId: 'op-request', replaces: 'job-1-trainer-0' });

      expect(machine.machineId).toBe('job-1-trainer-0');
      const pod = fake.pod(NAMESPACE, 'job-1-trainer-0')!;
      expect(pod.metadata.uid).not.toBe(oldUid);
      expect(pod.spec.nodeName).not.toBe('node-1');
    });

    it('returns the first result again for a repeated operation, without calling the API', async () => {
      await orchestrator.isolateMachine({ operationId: 'op-isolate', jobId: 'job-1', machineId: 'job-1-rollout-a', reason: 'ecc' });
      const first = await orchestrator.requestMachine({ ...request, operationId: 'op-request', replaces: 'job-1-rollout-a' });
      fake.clearRequests();

      const again = await orchestrator.requestMachine({ ...request, operationId: 'op-request', replaces: 'job-1-rollout-a' });

      expect(again).toEqual(first);
      expect(fake.requests).toHaveLength(0);
    });

    it('hands out distinct pods to two replacements in the same role, zone and class', async () => {
      fake.addNode('node-spare-2', { zone: 'zone-a' });
      await orchestrator.isolateMachine({ operationId: 'i-a', jobId: 'job-1', machineId: 'job-1-rollout-a', reason: 'ecc' });
      await orchestrator.isolateMachine({ operationId: 'i-b', jobId: 'job-1', machineId: 'job-1-rollout-b', reason: 'ecc' });

      const [a, b] = await Promise.all([
        orchestrator.requestMachine({ ...request, operationId: 'r-a', replaces: 'job-1-rollout-a' }),
        orchestrator.requestMachine({ ...request, operationId: 'r-b', replaces: 'job-1-rollout-b' }),
      ]);

      expect(a.machineId).not.toBe(b.machineId);
      expect([a.machineId, b.machineId]).not.toContain('job-1-rollout-a');
      expect([a.machineId, b.machineId]).not.toContain('job-1-rollout-b');
    });

    it('times out with a retriable error saying what it waited for, and a retry of the operation can still succeed', async () => {
      await orchestrator.close();
      orchestrator = new KubernetesOrchestrator({ kubeConfig: fake.kubeConfig(), namespace: NAMESPACE, readyTimeoutMs: 150, pollIntervalMs: 10 });
      // The only free node is cordoned too, so the replacement stays Pending.
      fake.node('node-spare')!.spec.unschedulable = true;
      await orchestrator.isolateMachine({ operationId: 'op-isolate', jobId: 'job-1', machineId: 'job-1-rollout-a', reason: 'ecc' });

      const error = await rejection(orchestrator.requestMachine({ ...request, operationId: 'op-request', replaces: 'job-1-rollout-a' }));

      expect(error.retriable).toBe(true);
      expect(error.message).toMatch(
        /timed out after 150 ms waiting for a new Running pod for job job-1 role rollout zone zone-a hardware class h100 replacing job-1-rollout-a/,
      );
      expect(fake.listPods(NAMESPACE).some((p) => p.status.phase === 'Pending')).toBe(true);

      fake.addNode('node-repaired', { zone: 'zone-a' });
      const machine = await orchestrator.requestMachine({ ...request, operationId: 'op-request', replaces: 'job-1-rollout-a' });
      expect(fake.pod(NAMESPACE, machine.machineId)!.spec.nodeName).toBe('node-repaired');
    });
  });

  describe('requestMachine without replaces (scale-up)', () => {
    const scaleUp = { jobId: 'job-1', role: 'rollout' as const, zone: 'zone-a', hardwareClass: 'h100' };
    const rolloutPods = () =>
      fake.listPods(NAMESPACE).filter((p) => p.metadata.labels[PodLabels.job] === 'job-1' && p.metadata.labels[PodLabels.role] === 'rollout');

    it("raises the Deployment's replicas by one, found through the ReplicaSet, and returns the new Running pod", async () => {
      const deployment = fake.workload('Deployment', NAMESPACE, 'job-1-rollout')!;
      const resourceVersion = deployment.metadata.resourceVersion;

      const machine = await orchestrator.requestMachine({ ...scaleUp, operationId: 'op-up' });

      expect(machine).toMatchObject({ role: 'rollout', zone: 'zone-a', hardwareClass: 'h100' });
      expect(['job-1-rollout-a', 'job-1-rollout-b']).not.toContain(machine.machineId);
      expect(fake.pod(NAMESPACE, machine.machineId)!.status.phase).toBe('Running');
      expect(rolloutPods()).toHaveLength(3);
      expect(fake.requestsMatching('GET', /replicasets\/job-1-rollout-5c8d$/).length).toBeGreaterThan(0);
      const [patch] = fake.requestsMatching('PATCH', /./);
      expect(patch.path).toBe('/apis/apps/v1/namespaces/rl/deployments/job-1-rollout');
      expect(patch.contentType).toBe('application/merge-patch+json');
      expect(patch.body).toMatchObject({ metadata: { resourceVersion, annotations: { [OwnerAnnotations.operation]: 'op-up' } }, spec: { replicas: 3 } });
      expect(fake.workload('Deployment', NAMESPACE, 'job-1-rollout')!.spec.replicas).toBe(3);
      expect(fake.workload('Deployment', NAMESPACE, 'job-2-rollout')!.spec.replicas).toBe(1);
      expect(fake.requestsMatching('DELETE', /./)).toHaveLength(0);
    });

    it('raises a StatefulSet by one and returns its next ordinal', async () => {
      const machine = await orchestrator.requestMachine({ ...scaleUp, role: 'trainer', operationId: 'op-up' });

      expect(machine.machineId).toBe('job-1-trainer-1');
      expect(fake.pod(NAMESPACE, 'job-1-trainer-1')!.status.phase).toBe('Running');
      expect(fake.workload('StatefulSet', NAMESPACE, 'job-1-trainer')!.spec.replicas).toBe(2);
      expect(fake.requestsMatching('PATCH', /./).map((r) => r.path)).toEqual(['/apis/apps/v1/namespaces/rl/statefulsets/job-1-trainer']);
    });

    it('counts two concurrent scale-ups twice and hands each its own pod', async () => {
      fake.addNode('node-spare-2', { zone: 'zone-a' });

      const [a, b] = await Promise.all([
        orchestrator.requestMachine({ ...scaleUp, operationId: 'op-up-a' }),
        orchestrator.requestMachine({ ...scaleUp, operationId: 'op-up-b' }),
      ]);

      expect(a.machineId).not.toBe(b.machineId);
      expect(fake.workload('Deployment', NAMESPACE, 'job-1-rollout')!.spec.replicas).toBe(4);
      expect(rolloutPods().filter((p) => p.status.phase === 'Running')).toHaveLength(4);
    });

    it('retries a replicas patch that lost to a concurrent change (409) on the new value', async () => {
      fake.failRequests({ method: 'PATCH', path: /deployments/, status: 409, times: 1 });

      await orchestrator.requestMachine({ ...scaleUp, operationId: 'op-up' });

      expect(fake.requestsMatching('PATCH', /deployments/)).toHaveLength(2);
      expect(fake.workload('Deployment', NAMESPACE, 'job-1-rollout')!.spec.replicas).toBe(3);
    });

    it('returns the first result again for a repeated operation, and a retry after a timeout does not scale again', async () => {
      await orchestrator.close();
      orchestrator = new KubernetesOrchestrator({ kubeConfig: fake.kubeConfig(), namespace: NAMESPACE, readyTimeoutMs: 150, pollIntervalMs: 10 });
      fake.node('node-spare')!.spec.unschedulable = true;

      const error = await rejection(orchestrator.requestMachine({ ...scaleUp, operationId: 'op-up' }));
      expect(error.retriable).toBe(true);
      expect(error.message).toContain('(scale-up)');

      fake.addNode('node-new', { zone: 'zone-a' });
      const machine = await orchestrator.requestMachine({ ...scaleUp, operationId: 'op-up' });
      fake.clearRequests();
      await expect(orchestrator.requestMachine({ ...scaleUp, operationId: 'op-up' })).resolves.toEqual(machine);

      expect(fake.requests).toHaveLength(0);
      expect(fake.workload('Deployment', NAMESPACE, 'job-1-rollout')!.spec.replicas).toBe(3);
    });

    it('refuses a role of bare pods with a non-retriable error saying so', async () => {
      fake.addPod({
        name: 'hybrid-bare',
        namespace: NAMESPACE,
        nodeName: 'node-spare',
        labels: { [PodLabels.job]: 'job-1', [PodLabels.role]: 'hybrid', [PodLabels.zone]: 'zone-a', [PodLabels.hardwareClass]: 'h100' },
      });

      const error = await rejection(orchestrator.requestMachine({ ...scaleUp, role: 'hybrid', operationId: 'op-up' }));

      expect(error.retriable).toBe(false);
      expect(error.message).toMatch(/bare pods, owned by no StatefulSet or Deployment/);
      expect(fake.requestsMatching('PATCH', /./)).toHaveLength(0);
    });

    it('reports a forbidden scale (RBAC) as non-retriable, naming the Deployment', async () => {
      fake.failRequests({ method: 'PATCH', path: /deployments/, status: 403, message: 'deployments.apps "job-1-rollout" is forbidden' });

      const error = await rejection(orchestrator.requestMachine({ ...scaleUp, operationId: 'op-up' }));

      expect(error.retriable).toBe(false);
      expect(error.message).toMatch(/scale deployment rl\/job-1-rollout from 2 to 3 replicas failed with HTTP 403/);
      expect(fake.workload('Deployment', NAMESPACE, 'job-1-rollout')!.spec.replicas).toBe(2);
    });

    it('reports a forbidden ReplicaSet read (RBAC) as non-retriable', async () => {
      fake.failRequests({ method: 'GET', path: /replicasets/, status: 403 });

      const error = await rejection(orchestrator.requestMachine({ ...scaleUp, operationId: 'op-up' }));

      expect(error.retriable).toBe(false);
      expect(error.message).toContain('read replicaset rl/job-1-rollout-5c8d');
    });
  });

  describe('releaseMachine', () => {
    const release = { operationId: 'op-release', jobId: 'job-1', machineId: 'job-1-rollout-a', reason: 'pool shrinks' };

    it('gives a Deployment pod the lowest deletion cost and scales down, so that exact pod goes; nothing is cordoned', async () => {
      // Without the deletion cost the ReplicaSet would remove the newer pod, job-1-rollout-b.
      const bUid = fake.pod(NAMESPACE, 'job-1-rollout-b')!.metadata.uid;

      const released = await orchestrator.releaseMachine(release);

      expect(released).toBe('job-1-rollout-a');
      expect(fake.pod(NAMESPACE, 'job-1-rollout-a')).toBeUndefined();
      expect(fake.pod(NAMESPACE, 'job-1-rollout-b')!.metadata.uid).toBe(bUid);
      expect(fake.workload('Deployment', NAMESPACE, 'job-1-rollout')!.spec.replicas).toBe(1);
      const writes = fake.requests.filter((r) => r.method !== 'GET');
      expect(writes.map((r) => `${r.method} ${r.path}`)).toEqual([
        'PATCH /api/v1/namespaces/rl/pods/job-1-rollout-a',
        'PATCH /apis/apps/v1/namespaces/rl/deployments/job-1-rollout',
      ]);
      expect(writes[0].body).toMatchObject({
        metadata: { annotations: { [PodAnnotations.deletionCost]: '-2147483648', [PodAnnotations.operation]: 'op-release' } },
      });
      expect(writes[1].body).toMatchObject({ spec: { replicas: 1 }, metadata: { annotations: { [OwnerAnnotations.operation]: 'op-release' } } });
      for (const node of ['node-1', 'node-2', 'node-3', 'node-4', 'node-spare']) expect(fake.node(node)!.spec.unschedulable).toBeUndefined();
      expect(await orchestrator.listMachines('job-1')).toHaveLength(2);
    });

    it('in a StatefulSet releases the highest ordinal, and says so', async () => {
      for (const ordinal of [1, 2]) {
        fake.addPod({
          name: `job-1-trainer-${ordinal}`,
          namespace: NAMESPACE,
          nodeName: ordinal === 1 ? 'node-spare' : undefined,
          owner: { kind: 'StatefulSet', name: 'job-1-trainer' },
          labels: fake.pod(NAMESPACE, 'job-1-trainer-0')!.metadata.labels,
        });
      }
      fake.addNode('node-5', { zone: 'zone-a' });
      fake.workload('StatefulSet', NAMESPACE, 'job-1-trainer')!.spec.replicas = 3;

      const released = await orchestrator.releaseMachine({ ...release, machineId: 'job-1-trainer-0' });

      expect(released).toBe('job-1-trainer-2');
      expect(fake.pod(NAMESPACE, 'job-1-trainer-2')).toBeUndefined();
      expect(fake.pod(NAMESPACE, 'job-1-trainer-0')).toBeDefined();
      expect(fake.pod(NAMESPACE, 'job-1-trainer-1')).toBeDefined();
      expect(fake.workload('StatefulSet', NAMESPACE, 'job-1-trainer')!.spec.replicas).toBe(2);
      expect(fake.requestsMatching('PATCH', /pods|nodes/)).toHaveLength(0);
    });

    it('is idempotent: a repeated operation calls nothing, a vanished machine is released, and nothing is cordoned', async () => {
      const first = await orchestrator.releaseMachine(release);
      fake.clearRequests();

      await expect(orchestrator.releaseMachine(release)).resolves.toBe(first);
      expect(fake.requests).toHaveLength(0);

      await expect(orchestrator.releaseMachine({ ...release, operationId: 'op-again' })).resolves.toBe('job-1-rollout-a');
      await expect(orchestrator.releaseMachine({ ...release, operationId: 'op-other-job', machineId: 'job-2-rollout-a' })).resolves.toBe('job-2-rollout-a');
      expect(fake.requests.map((r) => r.method)).toEqual(['GET', 'GET']);
      expect(fake.pod(NAMESPACE, 'job-2-rollout-a')).toBeDefined();
      expect(fake.workload('Deployment', NAMESPACE, 'job-1-rollout')!.spec.replicas).toBe(1);
    });

    it('scales a pool released down to no pods back up through the owner it remembers', async () => {
      await orchestrator.releaseMachine(release);
      await orchestrator.releaseMachine({ ...release, operationId: 'op-release-b', machineId: 'job-1-rollout-b' });
      expect(fake.workload('Deployment', NAMESPACE, 'job-1-rollout')!.spec.replicas).toBe(0);

      const machine = await orchestrator.requestMachine({ operationId: 'op-up', jobId: 'job-1', role: 'rollout', zone: 'zone-a', hardwareClass: 'h100' });

      expect(fake.pod(NAMESPACE, machine.machineId)!.status.phase).toBe('Running');
      expect(fake.workload('Deployment', NAMESPACE, 'job-1-rollout')!.spec.replicas).toBe(1);
    });

    it('reports a forbidden pod annotation or scale (RBAC) as non-retriable, and scales nothing down', async () => {
      fake.failRequests({ method: 'PATCH', path: /pods/, status: 403, times: 1 });
      const podError = await rejection(orchestrator.releaseMachine(release));
      expect(podError.retriable).toBe(false);
      expect(podError.message).toContain('annotate pod rl/job-1-rollout-a failed with HTTP 403');

      fake.failRequests({ method: 'PATCH', path: /statefulsets/, status: 403 });
      const scaleError = await rejection(orchestrator.releaseMachine({ ...release, operationId: 'op-2', machineId: 'job-1-trainer-0' }));
      expect(scaleError.retriable).toBe(false);
      expect(scaleError.message).toContain('scale statefulset rl/job-1-trainer from 1 to 0 replicas failed with HTTP 403');
      expect(fake.workload('Deployment', NAMESPACE, 'job-1-rollout')!.spec.replicas).toBe(2);
      expect(fake.workload('StatefulSet', NAMESPACE, 'job-1-trainer')!.spec.replicas).toBe(1);
    });
  });

  describe('restartMachines', () => {
    it('deletes the pods and resolves once their replacements are Running', async () => {
      const oldUid = fake.pod(NAMESPACE, 'job-1-rollout-b')!.metadata.uid;

      await orchestrator.restartMachines({ operationId: 'op-restart', jobId: 'job-1', machineIds: ['job-1-rollout-b'] });

      expect(fake.requestsMatching('DELETE', /pods\//).map((r) => r.path)).toEqual(['/api/v1/namespaces/rl/pods/job-1-rollout-b']);
      const rollouts = fake.listPods(NAMESPACE).filter((p) => p.metadata.labels[PodLabels.job] === 'job-1' && p.metadata.labels[PodLabels.role] === 'rollout');
      expect(rollouts).toHaveLength(2);
      expect(rollouts.map((p) => p.metadata.uid)).not.toContain(oldUid);
      expect(rollouts.every((p) => p.status.phase === 'Running')).toBe(true);
    });

    it('after timing out, a retry of the operation waits instead of deleting the replacements', async () => {
      await orchestrator.close();
      orchestrator = new KubernetesOrchestrator({ kubeConfig: fake.kubeConfig(), namespace: NAMESPACE, readyTimeoutMs: 100, pollIntervalMs: 10 });
      fake.node('node-spare')!.spec.unschedulable = true;
      // Node-1 frees up when trainer-0 goes; cordoned, it leaves the replacement nowhere to run.
      fake.node('node-1')!.spec.unschedulable = true;
      const restart = { operationId: 'op-restart', jobId: 'job-1', machineIds: ['job-1-trainer-0'] };

      const error = await rejection(orchestrator.restartMachines(restart));
      expect(error.retriable).toBe(true);
      expect(error.message).toContain('1 trainer');

      fake.addNode('node-repaired', { zone: 'zone-a' });
      await orchestrator.restartMachines(restart);

      expect(fake.requestsMatching('DELETE', /pods\//)).toHaveLength(1);
      expect(fake.pod(NAMESPACE, 'job-1-trainer-0')!.status.phase).toBe('Running');
    });
  });

  describe('restartTask', () => {
    it("deletes every pod of the job and no other job's, and waits for all replacements", async () => {
      const job2Uid = fake.pod(NAMESPACE, 'job-2-rollout-a')!.metadata.uid;
      const job1Uids = fake
        .listPods(NAMESPACE)
        .filter((p) => p.metadata.labels[PodLabels.job] === 'job-1')
        .map((p) => p.metadata.uid);

      await orchestrator.restartTask({ operationId: 'op-task', jobId: 'job-1' });

      expect(
        fake
          .requestsMatching('DELETE', /pods\//)
          .map((r) => r.path.split('/').pop())
          .sort(),
      ).toEqual(['job-1-rollout-a', 'job-1-rollout-b', 'job-1-trainer-0']);
      expect(fake.pod(NAMESPACE, 'job-2-rollout-a')!.metadata.uid).toBe(job2Uid);
      const job1 = fake.listPods(NAMESPACE).filter((p) => p.metadata.labels[PodLabels.job] === 'job-1');
      expect(job1).toHaveLength(3);
      expect(job1.every((p) => p.status.phase === 'Running' && !job1Uids.includes(p.metadata.uid))).toBe(true);
    });

    it('refuses an operation id already used for another kind of operation', async () => {
      await orchestrator.isolateMachine({ operationId: 'op-1', jobId: 'job-1', machineId: 'job-1-rollout-a', reason: 'ecc' });

      const error = await rejection(orchestrator.restartTask({ operationId: 'op-1', jobId: 'job-1' }));

      expect(error.retriable).toBe(false);
      expect(error.message).toContain('already used for isolateMachine');
    });
  });

  describe('fromEnv', () => {
    it('takes the namespace from ROBUSTRL_K8S_NAMESPACE, else from the kubeconfig context', async () => {
      const fromEnv = KubernetesOrchestrator.fromEnv({ ROBUSTRL_K8S_NAMESPACE: NAMESPACE }, fake.kubeConfig('elsewhere'));
      await expect(fromEnv.listMachines('job-2')).resolves.toHaveLength(1);

      const fromContext = KubernetesOrchestrator.fromEnv({}, fake.kubeConfig(NAMESPACE));
      await expect(fromContext.listMachines('job-2')).resolves.toHaveLength(1);
    });

    it('names a bad setting', () => {
      expect(() => KubernetesOrchestrator.fromEnv({}, fake.kubeConfig())).toThrow(/ROBUSTRL_K8S_NAMESPACE/);
      expect(() => KubernetesOrchestrator.fromEnv({ ROBUSTRL_K8S_NAMESPACE: 'rl', ROBUSTRL_K8S_READY_TIMEOUT_MS: 'soon' }, fake.kubeConfig())).toThrow(
        /ROBUSTRL_K8S_READY_TIMEOUT_MS must be a positive integer/,
      );
    });
  });
});
