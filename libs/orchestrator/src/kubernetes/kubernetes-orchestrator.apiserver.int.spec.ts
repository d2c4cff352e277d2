import { randomBytes } from 'node:crypto';
import { AppsV1Api, CoreV1Api, KubeConfig, PatchUtils, V1Pod } from '@kubernetes/client-node';
import { eventually } from '@robustrl/testing/eventually';
import { KubernetesOrchestrator, NodeAnnotations, PodLabels } from './kubernetes-orchestrator';

/**
 * The Kubernetes orchestrator against a real API server: kube-apiserver, controller-manager
 * and scheduler built from the Kubernetes modules, kwok's fake kubelets on four nodes
 * (deploy/k8s/cluster.sh; `npm run test:deploy` brings it up and sets ROBUSTRL_K8S_KUBECONFIG). The
 * real Deployment, ReplicaSet and StatefulSet controllers and the real scheduler answer what the
 * orchestrator does; the in-process fake API server stays for the unit specs. Without a cluster the
 * suite is skipped, saying why.
 */
const kubeconfigPath = process.env.ROBUSTRL_K8S_KUBECONFIG;
const describeWithCluster = kubeconfigPath ? describe : describe.skip;
if (!kubeconfigPath)
  console.warn('kubernetes-orchestrator.apiserver: skipped (no ROBUSTRL_K8S_KUBECONFIG: run `npm run test:deploy`, which starts deploy/k8s/cluster.sh)');

jest.setTimeout(180_000);

describeWithCluster('KubernetesOrchestrator on a real API server (kwok nodes)', () => {
  const namespace = `orch-${randomBytes(3).toString('hex')}`;
  const job = 'job-1';
  const kubeConfig = new KubeConfig();
  let core: CoreV1Api;
  let apps: AppsV1Api;
  let orchestrator: KubernetesOrchestrator;

  const labels = (role: string) => ({ [PodLabels.job]: job, [PodLabels.role]: role, [PodLabels.zone]: 'zone-a', [PodLabels.hardwareClass]: 'h100' });
  const template = (role: string) => ({
    metadata: { labels: labels(role) },
    spec: {
      // The GPU nodes: where a job's machines go (the control plane is kept off them).
      nodeSelector: { 'nvidia.com/gpu.present': 'true' },
      containers: [{ name: 'agent', image: 'robustrl:kwok-never-pulled' }],
    },
  });
  const running = async () =>
    (await core.listNamespacedPod(namespace, undefined, undefined, undefined, undefined, `${PodLabels.job}=${job}`)).body.items.filter(
      (p: V1Pod) => p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp,
    );

  beforeAll(async () => {
    kubeConfig.loadFromFile(kubeconfigPath!);
    core = kubeConfig.makeApiClient(CoreV1Api);
    apps = kubeConfig.makeApiClient(AppsV1Api);
    await core.createNamespace({ metadata: { name: namespace } });
    await apps.createNamespacedStatefulSet(namespace, {
      metadata: { name: `${job}-trainer` },
      spec: { serviceName: `${job}-trainer`, replicas: 1, selector: { matchLabels: labels('trainer') }, template: template('trainer') },
    });
    await apps.createNamespacedDeployment(namespace, {
      metadata: { name: `${job}-rollout` },
      spec: { replicas: 2, selector: { matchLabels: labels('rollout') }, template: template('rollout') },
    });
    await eventually('the job’s three pods Running on kwok nodes', async () => ((await running()).length === 3 ? true : undefined), 60_000);
    orchestrator = new KubernetesOrchestrator({ kubeConfig, namespace, readyTimeoutMs: 60_000, pollIntervalMs: 250 });
  });

  afterAll(async () => {
    await orchestrator?.close();
    // The cordons this suite made go, so the next suite (the chart's install) finds every GPU node (the victim may have been on any).
    const uncordon = { headers: { 'Content-Type': PatchUtils.PATCH_FORMAT_JSON_MERGE_PATCH } };
    for (const node of ['gpu-0', 'gpu-1', 'gpu-2'])
      await core?.patchNode(node, { spec: { unschedulable: false } }, undefined, undefined, undefined, undefined, undefined, uncordon).catch(() => undefined);
    await core?.deleteNamespace(namespace).catch(() => undefined);
  });

  it('lists the job’s machines: its pods, by their labels', async () => {
    const machines = await orchestrator.listMachines(job);
    expect(machines.map((m) => m.role).sort()).toEqual(['rollout', 'rollout', 'trainer']);
    expect(machines.find((m) => m.role === 'trainer')?.machineId).toBe(`${job}-trainer-0`);
  });

  it('isolates a machine (its node cordoned and annotated, its pod deleted) and hands out the Deployment’s replacement on another node', async () => {
    const victim = (await running()).find((p) => p.metadata!.labels![PodLabels.role] === 'rollout')!;
    const node = victim.spec!.nodeName!;
    await orchestrator.isolateMachine({ operationId: 'op-isolate', jobId: job, machineId: victim.metadata!.name!, reason: 'rollout-silent (test)' });
    const cordoned = (await core.readNode(node)).body;
    expect(cordoned.spec?.unschedulable).toBe(true);
    expect(cordoned.metadata?.annotations?.[NodeAnnotations.isolatedMachine]).toBe(`${namespace}/${victim.metadata!.name}`);

    const replacement = await orchestrator.requestMachine({
      operationId: 'op-replace',
      jobId: job,
      role: 'rollout',
      zone: 'zone-a',
      hardwareClass: 'h100',
      replaces: victim.metadata!.name!,
    });
    expect(replacement.machineId).not.toBe(victim.metadata!.name);
    const pod = (await core.readNamespacedPod(replacement.machineId, namespace)).body;
    expect(pod.status?.phase).toBe('Running');
    // The scheduler kept it off the cordoned node, on the other GPU node.
    expect(pod.spec?.nodeName).not.toBe(node);
    expect(pod.spec?.nodeName).toMatch(/^gpu-/);
  });

  it('scales up by one machine (the Deployment’s replicas + 1) and releases one again', async () => {
    const added = await orchestrator.requestMachine({ operationId: 'op-scale-up', jobId: job, role: 'rollout', zone: 'zone-a', hardwareClass: 'h100' });
    expect((await apps.readNamespacedDeployment(`${job}-rollout`, namespace)).body.spec?.replicas).toBe(3);
    expect((await core.readNamespacedPod(added.machineId, namespace)).body.status?.phase).toBe('Running');

    const released = await orchestrator.releaseMachine({ operationId: 'op-release', jobId: job, machineId: added.machineId, reason: 'pool shrinks (test)' });
    expect(released).toBe(added.machineId);
    expect((await apps.readNamespacedDeployment(`${job}-rollout`, namespace)).body.spec?.replicas).toBe(2);
    await eventually('the released pod gone', async () => ((await running()).some((p) => p.metadata!.name === added.machineId) ? undefined : true), 30_000);
  });

  it('restarts the trainer’s pod: the StatefulSet recreates it (same name, new UID), Running again', async () => {
    const before = (await core.readNamespacedPod(`${job}-trainer-0`, namespace)).body;
    await orchestrator.restartMachines({ operationId: 'op-restart', jobId: job, machineIds: [`${job}-trainer-0`] });
    const after = (await core.readNamespacedPod(`${job}-trainer-0`, namespace)).body;
    expect(after.metadata?.uid).not.toBe(before.metadata?.uid);
    expect(after.status?.phase).toBe('Running');
  });

  it('restarts the whole task: every pod of the job replaced, the same count Running', async () => {
    const before = new Set((await running()).map((p) => p.metadata!.uid));
    await orchestrator.restartTask({ operationId: 'op-task', jobId: job });
    const after = await running();
    expect(after).toHaveLength(3);
    expect(after.filter((p) => before.has(p.metadata!.uid))).toEqual([]);
  });
});
