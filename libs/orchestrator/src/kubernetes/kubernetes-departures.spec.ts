import { FakeKubernetesApiServer, OwnerKind } from '@robustrl/testing/fake-kubernetes-api-server';
import { OrchestratorError } from '../orchestrator';
import { departureSourceOf } from '../departures';
import { KubernetesOrchestrator, PodLabels } from './kubernetes-orchestrator';

const NAMESPACE = 'rl';

/**
 * The adapter's departures read through the API (a stand-in server): what the cluster announced, and
 * not what the adapter did itself. Which announcement means what is disruption-notices.spec.ts's.
 */
describe('KubernetesOrchestrator.departures', () => {
  let fake: FakeKubernetesApiServer;
  let orchestrator: KubernetesOrchestrator;

  beforeEach(async () => {
    // Deleted pods stay visible, with their deletionTimestamp, for their grace period.
    fake = await FakeKubernetesApiServer.start({ replacementDelayMs: 10, runningDelayMs: 20, terminationMs: 5_000 });
    for (const n of ['node-1', 'node-2', 'node-3', 'node-spare']) fake.addNode(n, { zone: 'zone-a' });
    const labels = (role: string) => ({ [PodLabels.job]: 'job-1', [PodLabels.role]: role, [PodLabels.zone]: 'zone-a', [PodLabels.hardwareClass]: 'h100' });
    const owner = { kind: 'ReplicaSet' as OwnerKind, name: 'job-1-rollout-5c8d' };
    fake.addDeployment({ name: 'job-1-rollout', replicaSetName: 'job-1-rollout-5c8d', namespace: NAMESPACE, replicas: 2, podLabels: labels('rollout') });
    fake.addStatefulSet({ name: 'job-1-trainer', namespace: NAMESPACE, replicas: 1, podLabels: labels('trainer') });
    fake.addPod({
      name: 'job-1-trainer-0',
      namespace: NAMESPACE,
      nodeName: 'node-1',
      owner: { kind: 'StatefulSet', name: 'job-1-trainer' },
      labels: labels('trainer'),
    });
    fake.addPod({ name: 'job-1-rollout-a', namespace: NAMESPACE, nodeName: 'node-2', owner, labels: labels('rollout') });
    fake.addPod({ name: 'job-1-rollout-b', namespace: NAMESPACE, nodeName: 'node-3', owner, labels: labels('rollout') });
    // A pod of no job (the control plane's): never a machine.
    fake.addPod({ name: 'detector-0', namespace: NAMESPACE, nodeName: 'node-spare', owner, labels: { app: 'detector' } });
    orchestrator = new KubernetesOrchestrator({ kubeConfig: fake.kubeConfig(), namespace: NAMESPACE, readyTimeoutMs: 2_000, pollIntervalMs: 10 });
  });

  afterEach(async () => {
    await orchestrator.close();
    await fake.close();
  });

  it('is the port the controller looks for', () => {
    expect(departureSourceOf(orchestrator)).toBe(orchestrator);
    expect(departureSourceOf({ listMachines: () => [] })).toBeNull();
  });

  it('reports an evicted pod and a node marked for removal, and nothing on a quiet cluster', async () => {
    expect(await orchestrator.departures()).toEqual([]);
    const deletion = new Date(Date.now() + 30_000).toISOString();
    const trainer = fake.pod(NAMESPACE, 'job-1-trainer-0')!;
    trainer.status.conditions = [{ type: 'DisruptionTarget', status: 'True', reason: 'EvictionByEvictionAPI', lastTransitionTime: new Date().toISOString() }];
    trainer.metadata.deletionTimestamp = deletion;
    fake.node('node-2')!.spec.taints = [{ key: 'ToBeDeletedByClusterAutoscaler', value: '1', effect: 'NoSchedule' }];

    const found = (await orchestrator.departures()).sort((a, b) => a.machineId.localeCompare(b.machineId));
    expect(found).toEqual([
      expect.objectContaining({
        jobId: 'job-1',
        machineId: 'job-1-rollout-a',
        role: 'rollout',
        departsAt: null,
        reason: 'taint ToBeDeletedByClusterAutoscaler=1:NoSchedule',
      }),
      expect.objectContaining({
        jobId: 'job-1',
        machineId: 'job-1-trainer-0',
        role: 'trainer',
        departsAt: Date.parse(deletion),
        reason: 'DisruptionTarget EvictionByEvictionAPI',
      }),
    ]);
    // Nodes are read one by one (the controller's role may get a node, not list them).
    expect(fake.requests.some((r) => r.method === 'GET' && r.path === '/api/v1/nodes')).toBe(false);
  });

  it('the pods the adapter ends itself (an isolation, a release) are not notices, though they are deleted with a grace', async () => {
    await orchestrator.isolateMachine({ operationId: 'op-1', jobId: 'job-1', machineId: 'job-1-rollout-b', reason: 'test' });
    await orchestrator.releaseMachine({ operationId: 'op-2', jobId: 'job-1', machineId: 'job-1-rollout-a', reason: 'test' }).catch(() => undefined);
    expect(fake.pod(NAMESPACE, 'job-1-rollout-b')?.metadata.deletionTimestamp).toBeDefined();
    expect(fake.pod(NAMESPACE, 'job-1-rollout-a')?.metadata.deletionTimestamp).toBeDefined();
    expect(await orchestrator.departures()).toEqual([]);
    // The same deletion by anyone else is one.
    fake.pod(NAMESPACE, 'job-1-trainer-0')!.metadata.deletionTimestamp = new Date(Date.now() + 30_000).toISOString();
    expect((await orchestrator.departures()).map((d) => d.machineId)).toEqual(['job-1-trainer-0']);
  });

  it('an API server that cannot be read is an orchestrator error, retriable', async () => {
    fake.failRequests({ path: /\/pods$/, status: 503, times: 1 });
    const error = await orchestrator.departures().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OrchestratorError);
    expect((error as OrchestratorError).retriable).toBe(true);
  });
});
