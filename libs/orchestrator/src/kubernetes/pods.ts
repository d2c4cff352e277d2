/** What the Kubernetes adapter reads off pods and keys its memory by; pure. */
import type { V1Pod } from '@kubernetes/client-node';
import { HttpError } from '@kubernetes/client-node';
import { Role } from '@robustrl/contracts';
import { MachineSpec, OrchestratorError } from '../orchestrator';
import { PodLabels } from './pod-labels';

/** One incarnation of a pod: its name, and its UID where known (a StatefulSet's replacement keeps the name). */
export interface PodRef {
  name: string;
  uid?: string;
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** A job's pod as a machine: its name is the machine id, its labels the role, zone and hardware class. */
export function toMachineSpec(pod: V1Pod): MachineSpec {
  const name = pod.metadata?.name ?? '(unnamed)';
  const labels = pod.metadata?.labels ?? {};
  const role = Role.safeParse(labels[PodLabels.role]);
  const zone = labels[PodLabels.zone];
  const hardwareClass = labels[PodLabels.hardwareClass];
  // A mislabelled pod is a deployment error; skipping it would hide a machine from the controller.
  if (!role.success || !zone || !hardwareClass) {
    throw new OrchestratorError(
      `pod ${pod.metadata?.namespace}/${name} needs labels ${PodLabels.role} (one of ${Role.options.join(', ')}), ${PodLabels.zone} and ${PodLabels.hardwareClass}; it has ${JSON.stringify(labels)}`,
      false,
    );
  }
  return { machineId: name, role: role.data, zone, hardwareClass };
}

export function isTerminating(pod: V1Pod): boolean {
  return pod.metadata?.deletionTimestamp != null;
}

/**
 * Running or starting. A Failed pod (e.g. evicted) stays in the API until garbage-collected, but its
 * owner has already replaced it, so it is no machine.
 */
export function isLive(pod: V1Pod): boolean {
  return !isTerminating(pod) && pod.status?.phase !== 'Failed' && pod.status?.phase !== 'Succeeded';
}

export function isRunning(pod: V1Pod): boolean {
  return !isTerminating(pod) && pod.status?.phase === 'Running';
}

export function podRef(pod: V1Pod): PodRef {
  return { name: pod.metadata?.name ?? '', uid: pod.metadata?.uid };
}

/** A 409 is either a failed precondition (the object is not the one meant) or a write conflict, which is worth retrying. */
export function isPreconditionFailure(error: unknown): boolean {
  const message = ((error as HttpError).body as { message?: string } | undefined)?.message ?? '';
  return /precondition/i.test(message);
}

export function podUid(pod: V1Pod): string {
  return pod.metadata?.uid ?? `${pod.metadata?.namespace}/${pod.metadata?.name}`;
}

/** When a pod's deletion began (its deletionTimestamp less its grace period), or null when it is not being deleted. */
export function deletionStart(pod: V1Pod): number | null {
  const deadline = pod.metadata?.deletionTimestamp;
  if (!deadline) return null;
  return new Date(deadline).getTime() - (pod.metadata?.deletionGracePeriodSeconds ?? 0) * 1000;
}

export function creationTime(pod: V1Pod): number {
  return pod.metadata?.creationTimestamp ? new Date(pod.metadata.creationTimestamp).getTime() : 0;
}

export function poolSelector(pool: { jobId: string; role: Role; zone: string; hardwareClass: string }): Record<string, string> {
  return {
    [PodLabels.job]: labelValue('job id', pool.jobId),
    [PodLabels.role]: labelValue('role', pool.role),
    [PodLabels.zone]: labelValue('zone', pool.zone),
    [PodLabels.hardwareClass]: labelValue('hardware class', pool.hardwareClass),
  };
}

export function poolKey(pool: { role: Role; zone: string; hardwareClass: string }, jobId: string): string {
  return [jobId, pool.role, pool.zone, pool.hardwareClass].join('/');
}

export function isolationKey(jobId: string, machineId: string): string {
  return `${jobId}/${machineId}`;
}

/** Values go into label selectors, where an invalid one would make the API server answer 400 for every call. */
export function labelValue(what: string, value: string): string {
  if (value.length > 63 || !LABEL_VALUE.test(value)) {
    throw new OrchestratorError(
      `${what} '${value}' cannot be a Kubernetes label value (at most 63 characters: letters, digits, '-', '_', '.', starting and ending alphanumeric)`,
      false,
    );
  }
  return value;
}

export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(new OrchestratorError('the Kubernetes orchestrator was closed while waiting', true));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
