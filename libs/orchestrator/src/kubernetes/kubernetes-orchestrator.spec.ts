import { OrchestratorError } from '../orchestrator';
import { FakeKubernetesApiServer, OwnerKind } from './fake-api-server';
import { KubernetesOrchestrator, NodeAnnotations, PodLabels } from './kubernetes-orchestrator';
import { rejectionOf } from '../../../../test/support/rejection';

const NAMESPACE = 'rl';

// One job with a StatefulSet trainer and two Deployment rollout pods, each on its own node, plus a
// spare node (where replacements go) and another job's pod that must never be touched.
async function startCluster(options: { readyTimeoutMs?: number } = {}) {
  const fake = await FakeKubernetesApiServer.start({ replacementDelayMs: 10, runningDelayMs: 20 });
  for (const node of ['node-1', 'node-2', 'node-3', 'node-4', 'node-spare']) fake.addNode(node, { zone: 'zone-a' });
  const pod = (name: string, job: string, role: string, nodeName: string, owner: { kind: OwnerKind; name: string }) =>
    fake.addPod({
      name,
      namespace: NAMESPACE,
      nodeName,
      owner,
      labels: { [PodLabels.job]: job, [PodLabels.role]: role, [PodLabels.zone]: 'zone-a', [PodLabels.hardwareClass]: 'h100' },
    });
  pod('job-1-trainer-0', 'job-1', 'trainer', 'node-1', { kind: 'StatefulSet', name: 'job-1-trainer' });
  pod('job-1-rollout-a', 'job-1', 'rollout', 'node-2', { kind: 'ReplicaSet', name: 'job-1-rollout' });
  pod('job-1-rollout-b', 'job-1', 'rollout', 'node-3', { kind: 'ReplicaSet', name: 'job-1-rollout' });
  pod('job-2-rollout-a', 'job-2', 'rollout', 'node-4', { kind: 'ReplicaSet', name: 'job-2-rollout' });
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
      expect(error.message).toMatch(/timed out after 150 ms waiting for a new Running pod for job job-1 role rollout zone zone-a hardware class h100 replacing job-1-rollout-a/);
      expect(fake.listPods(NAMESPACE).some((p) => p.status.phase === 'Pending')).toBe(true);

      fake.addNode('node-repaired', { zone: 'zone-a' });
      const machine = await orchestrator.requestMachine({ ...request, operationId: 'op-request', replaces: 'job-1-rollout-a' });
      expect(fake.pod(NAMESPACE, machine.machineId)!.spec.nodeName).toBe('node-repaired');
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
      const job1Uids = fake.listPods(NAMESPACE).filter((p) => p.metadata.labels[PodLabels.job] === 'job-1').map((p) => p.metadata.uid);

      await orchestrator.restartTask({ operationId: 'op-task', jobId: 'job-1' });

      expect(fake.requestsMatching('DELETE', /pods\//).map((r) => r.path.split('/').pop()).sort()).toEqual(['job-1-rollout-a', 'job-1-rollout-b', 'job-1-trainer-0']);
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
