import { randomBytes } from 'node:crypto';
import { AppsV1Api, CoreV1Api, KubeConfig, PatchUtils, V1Pod } from '@kubernetes/client-node';
import { MessageOf, MessageType, RobustrlMessage } from '@robustrl/contracts';
import { KubernetesOrchestrator, LocalProcessSupervisor, PodLabels } from '@robustrl/orchestrator';
import { agentMachines } from '@robustrl/testing/agent-machines';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { eventually } from '@robustrl/testing/eventually';
import { KwokAgents } from '@robustrl/testing/kwok-agents';
import { InProcessControlPlane, jobStarted, startInProcessControlPlane } from './in-process-control-plane';

/**
 * A drain on a Kubernetes cluster, end to end (docs/planned-failures.md "Notices are evidence"): a real
 * API server, controller-manager and scheduler with kwok nodes (deploy/k8s/cluster.sh; `npm run
 * test:deploy` sets ROBUSTRL_K8S_KUBECONFIG), real Kafka and PostgreSQL, the detector and the controller
 * (its orchestrator the Kubernetes adapter) in this process, and each machine pod's agent a local process
 * (kwok runs no container: KwokAgents plays the kubelet). A rollout pod is evicted as `kubectl drain`
 * evicts it, with a 20 s grace; its agent is told nothing. The cluster's own announcement (the pod's
 * DisruptionTarget condition) is the notice, and the machine is replaced before its grace ends.
 */
jest.setTimeout(240_000);

const kubeconfigPath = process.env.ROBUSTRL_K8S_KUBECONFIG;
const describeWithCluster = kubeconfigPath ? describe : describe.skip;
if (!kubeconfigPath) console.warn('kwok-drain: skipped (no ROBUSTRL_K8S_KUBECONFIG: run `npm run test:deploy`, which starts deploy/k8s/cluster.sh)');

const GRACE_SECONDS = 20;

describeWithCluster('a kubectl-drain eviction of a rollout pod (kwok cluster, real Kafka and PostgreSQL)', () => {
  const suffix = randomBytes(3).toString('hex');
  const namespace = `drain-${suffix}`;
  const jobId = `job-${suffix}`;
  const topicPrefix = `e2e-kwok-drain-${suffix}.`;
  const brokers = (process.env.KAFKA_BROKERS ?? '').split(',');
  const kubeConfig = new KubeConfig();
  let core: CoreV1Api;
  let database: { url: string; drop(): Promise<void> };
  let supervisor: LocalProcessSupervisor;
  let kubelet: KwokAgents;
  let orchestrator: KubernetesOrchestrator;
  let plane: InProcessControlPlane;
  const cordoned = new Set<string>();
  const seen = (): RobustrlMessage[] => plane?.seen ?? [];
  const machineOutput: string[] = [];

  const all = <T extends MessageType>(type: T, where: (m: MessageOf<T>) => boolean = () => true): MessageOf<T>[] =>
    seen().filter((m): m is MessageOf<T> => m.jobId === jobId && m.type === type && where(m as MessageOf<T>));
  async function waitFor<T extends MessageType>(type: T, what: string, where?: (m: MessageOf<T>) => boolean, timeoutMs = 60_000) {
    try {
      return await eventually(what, () => all(type, where)[0], timeoutMs);
    } catch (err) {
      const events = seen()
        .filter((m) => m.jobId === jobId)
        .map((m) => `${m.occurredAt} ${m.type} ${m.source} ${JSON.stringify(m.data)}`);
      process.stderr.write(
        `--- machine output ---\n${machineOutput.slice(-40).join('\n')}\n--- kubelet errors ---\n${kubelet?.errors.join('\n')}\n--- events ---\n${events.join('\n')}\n`,
      );
      throw err;
    }
  }
  const labels = (role: string) => ({ [PodLabels.job]: jobId, [PodLabels.role]: role, [PodLabels.zone]: 'zone-a', [PodLabels.hardwareClass]: 'kwok' });
  const template = (role: string) => ({
    // kwok keeps a deleted pod for its grace period only when asked (deploy/k8s/build.sh's stages).
    metadata: { labels: labels(role), annotations: { 'robustrl.io/kwok-honour-grace': 'true' } },
    spec: {
      terminationGracePeriodSeconds: GRACE_SECONDS,
      nodeSelector: { 'nvidia.com/gpu.present': 'true' },
      containers: [{ name: 'agent', image: 'robustrl:kwok-never-pulled' }],
    },
  });
  const jobPods = async (): Promise<V1Pod[]> =>
    (await core.listNamespacedPod(namespace, undefined, undefined, undefined, undefined, `${PodLabels.job}=${jobId}`)).body.items;

  beforeAll(async () => {
    kubeConfig.loadFromFile(kubeconfigPath!);
    core = kubeConfig.makeApiClient(CoreV1Api);
    const apps = kubeConfig.makeApiClient(AppsV1Api);
    await core.createNamespace({ metadata: { name: namespace } });
    await apps.createNamespacedStatefulSet(namespace, {
      metadata: { name: `${jobId}-trainer` },
      spec: { serviceName: `${jobId}-trainer`, replicas: 1, selector: { matchLabels: labels('trainer') }, template: template('trainer') },
    });
    await apps.createNamespacedDeployment(namespace, {
      metadata: { name: `${jobId}-rollout` },
      spec: { replicas: 2, selector: { matchLabels: labels('rollout') }, template: template('rollout') },
    });
    await eventually(
      'the job’s three pods Running',
      async () => ((await jobPods()).filter((p) => p.status?.phase === 'Running').length === 3 ? true : undefined),
      60_000,
    );

    database = await freshDatabaseUrl('robustrl_e2e_kwok_drain');
    supervisor = agentMachines({ brokers, topicPrefix, databaseUrl: () => database.url, output: machineOutput });
    orchestrator = new KubernetesOrchestrator({ kubeConfig, namespace, readyTimeoutMs: 60_000, pollIntervalMs: 250 });
    process.env.ROBUSTRL_DEPARTURE_POLL_SECONDS = '0.5';
    process.env.ROBUSTRL_COMMAND_TIMEOUT_SECONDS = '60';
    plane = await startInProcessControlPlane({ name: 'e2e-kwok-drain', brokers, topicPrefix, databaseUrl: database.url, orchestrator });
    await plane.bus.publish(
      jobStarted(jobId, { trainers: 1, rollouts: 2 }, { trainerIdleWindowSeconds: 20, rolloutSilentWindowSeconds: 5, probeTimeoutSeconds: 2 }),
    );
    kubelet = new KwokAgents(core, namespace, jobId, supervisor);
    kubelet.start();
    for (const pod of await jobPods()) await waitFor('MachineRegistered', `${pod.metadata!.name} registered`, (m) => m.data.machineId === pod.metadata!.name);
  });

  afterAll(async () => {
    await kubelet?.stop();
    await plane?.stop();
    await orchestrator?.close();
    await supervisor?.close();
    await database?.drop();
    delete process.env.ROBUSTRL_DEPARTURE_POLL_SECONDS;
    delete process.env.ROBUSTRL_COMMAND_TIMEOUT_SECONDS;
    // The cordons go, so the suites after this one find every GPU node.
    const merge = { headers: { 'Content-Type': PatchUtils.PATCH_FORMAT_JSON_MERGE_PATCH } };
    for (const node of cordoned)
      await core?.patchNode(node, { spec: { unschedulable: false } }, undefined, undefined, undefined, undefined, undefined, merge).catch(() => undefined);
    await core?.deleteNamespace(namespace).catch(() => undefined);
  });

  it('the eviction is the notice, and the machine is replaced before its grace ends', async () => {
    await waitFor('TrainingStepCompleted', 'a step trained', () => true, 90_000);
    const pod = (await jobPods()).find((p) => p.metadata?.labels?.[PodLabels.role] === 'rollout')!;
    const machineId = pod.metadata!.name!;
    const node = pod.spec!.nodeName!;
    // What `kubectl drain` does: cordon the node, then evict its pods through the eviction API.
    cordoned.add(node);
    await core.patchNode(node, { spec: { unschedulable: true } }, undefined, undefined, undefined, undefined, undefined, {
      headers: { 'Content-Type': PatchUtils.PATCH_FORMAT_JSON_MERGE_PATCH },
    });
    const evictedAt = Date.now();
    await core.createNamespacedPodEviction(machineId, namespace, { metadata: { name: machineId, namespace } });
    const evicted = (await core.readNamespacedPod(machineId, namespace)).body;
    const deadline = new Date(evicted.metadata!.deletionTimestamp!).getTime();
    expect(evicted.status?.conditions?.some((c) => c.type === 'DisruptionTarget' && c.status === 'True')).toBe(true);

    const notice = await waitFor('AgentFaultSignalled', 'the notice', (m) => m.data.machineId === machineId);
    expect(notice.source).toBe('controller/departures');
    expect(notice.data).toMatchObject({ signal: 'node-draining', role: 'rollout' });
    expect(notice.data.detail).toContain('DisruptionTarget EvictionByEvictionAPI');
    expect(notice.data.departsInMs).toBeGreaterThan((GRACE_SECONDS - 5) * 1000);
    const verdict = await waitFor('FaultConfirmed', 'the verdict', (m) => m.data.machineId === machineId);
    expect(Math.abs(Date.parse(verdict.data.evidence.departsAt!) - deadline)).toBeLessThan(3_000);
    const decided = await waitFor('RecoveryDecided', 'the decision', (m) => m.data.verdictId === verdict.data.verdictId);
    expect(decided.data.rule).toBe('planned-rollout-departure');
    const completed = await waitFor('RecoveryCompleted', 'the recovery completed', (m) => m.data.recoveryId === decided.data.recoveryId);
    expect(completed.data.outcome).toBe('recovered');
    // Before the pod's grace ended: the evicted pod is still there, its agent still running.
    expect(Date.parse(completed.occurredAt)).toBeLessThan(deadline);
    process.stderr.write(
      `kwok-drain: ${machineId} evicted with ${GRACE_SECONDS} s grace; notice after ${Date.parse(notice.occurredAt) - evictedAt} ms, ` +
        `recovered after ${Date.parse(completed.occurredAt) - evictedAt} ms, ${deadline - Date.parse(completed.occurredAt)} ms before the pod's deadline\n`,
    );
    const replaced = all('RecoveryCommandSucceeded', (m) => m.data.recoveryId === decided.data.recoveryId && !!m.data.newMachineId)[0]!;
    expect(replaced.data.newMachineId).not.toBe(machineId);
    expect(all('MachineRegistered', (m) => m.data.machineId === replaced.data.newMachineId!)).not.toHaveLength(0);
    // The agent was told nothing: the only notice is the cluster's, sent once.
    expect(all('AgentFaultSignalled', (m) => m.data.machineId === machineId).map((m) => m.source)).toEqual(['controller/departures']);
    expect(all('RestartTask')).toEqual([]);
  });
});
