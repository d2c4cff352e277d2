import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import type { LocalProcessSupervisor, MachineSpec } from '@robustrl/orchestrator';
import { Role } from '@robustrl/contracts';

/** The pod labels a machine pod carries (libs/orchestrator's PodLabels), repeated to keep this file free of the adapter. */
const LABELS = { job: 'robustrl.io/job', role: 'robustrl.io/role', zone: 'robustrl.io/zone', hardwareClass: 'robustrl.io/hardware-class' } as const;

/**
 * What a kubelet does for a job's machine pods on kwok nodes, where no container runs: each Running pod
 * of the job gets its agent as a local process (the supervisor's), for as long as that pod incarnation
 * exists — a pod being deleted keeps its agent until it is gone, as a container given its whole grace
 * period would. The agent is not sent SIGTERM when the deletion begins: the notice must come from the
 * cluster (a DaemonSet agent is what `kubectl drain --ignore-daemonsets` leaves running). A pod gone is
 * a machine gone: its agent is killed.
 */
export class KwokAgents {
  /** Machine id (the pod name) → the UID of the incarnation its agent runs for. */
  private readonly running = new Map<string, string>();
  private readonly launchedOnce = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private syncing: Promise<void> | null = null;
  readonly errors: string[] = [];

  constructor(
    private readonly core: CoreV1Api,
    private readonly namespace: string,
    private readonly jobId: string,
    private readonly supervisor: LocalProcessSupervisor,
    private readonly intervalMs = 250,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.syncing ??= this.sync()
        .catch((error: unknown) => void this.errors.push(error instanceof Error ? error.message : String(error)))
        .finally(() => (this.syncing = null));
    }, this.intervalMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.syncing;
    for (const machineId of this.running.keys()) this.supervisor.killMachine(machineId);
    this.running.clear();
  }

  /** The machine ids with an agent now. */
  get machines(): string[] {
    return [...this.running.keys()];
  }

  private async sync(): Promise<void> {
    const { body } = await this.core.listNamespacedPod(this.namespace, undefined, undefined, undefined, undefined, `${LABELS.job}=${this.jobId}`);
    const present = new Map(body.items.map((p) => [p.metadata!.name!, p]));
    for (const [machineId, uid] of this.running) {
      if (present.get(machineId)?.metadata?.uid === uid) continue;
      this.supervisor.killMachine(machineId);
      await this.supervisor.exits(machineId);
      this.running.delete(machineId);
    }
    for (const pod of body.items) {
      const machineId = pod.metadata!.name!;
      if (this.running.has(machineId) || pod.status?.phase !== 'Running' || pod.metadata?.deletionTimestamp) continue;
      if (this.launchedOnce.has(machineId)) {
        // A StatefulSet's replacement keeps the name: the supervisor starts that machine again.
        await this.supervisor.restartMachines({ operationId: `kwok-${pod.metadata!.uid}`, jobId: this.jobId, machineIds: [machineId] });
      } else {
        await this.supervisor.launchJob(this.jobId, [machineOf(pod)]);
        this.launchedOnce.add(machineId);
      }
      this.running.set(machineId, pod.metadata!.uid!);
    }
  }
}

function machineOf(pod: V1Pod): MachineSpec {
  const labels = pod.metadata?.labels ?? {};
  return {
    machineId: pod.metadata!.name!,
    role: Role.parse(labels[LABELS.role]),
    zone: labels[LABELS.zone] ?? '',
    hardwareClass: labels[LABELS.hardwareClass] ?? '',
  };
}
