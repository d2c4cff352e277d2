/**
 * What a Kubernetes cluster announces before it takes a pod away, read from the pods and their nodes
 * (docs/planned-failures.md, "Notices are evidence"). Pure: the objects and the time are inputs.
 *
 * A job's running pod is departing when, first match wins:
 *  1. it has the `DisruptionTarget` condition (the eviction API for a drain, the scheduler's preemption,
 *     the taint manager, the kubelet's node shutdown): its deadline is the deletion's, else the
 *     condition's time plus the pod's grace period;
 *  2. it is being deleted (`deletionTimestamp`, which is when the grace period ends): someone scaled
 *     its owner down or deleted it;
 *  3. its node has a taint that announces the node's end: a `NoExecute` taint the pod does not tolerate
 *     (evicted at once: the taint's time plus the grace period) or tolerates for `tolerationSeconds`
 *     (then evicted), or a taint whose key is one of `noticeTaints` (an autoscaler's scale-down, a
 *     health controller's mark; no deadline).
 * The taints the node lifecycle controller puts on a node that stopped answering are not notices:
 * that machine failed, and the detector hears it from its silence.
 */
import type { V1Node, V1Pod, V1Taint, V1Toleration } from '@kubernetes/client-node';
import { Role } from '@robustrl/contracts';
import type { Departure } from '../departures';

/** Taint keys that announce a node's removal with no deadline: Cluster Autoscaler's and Karpenter's scale-down marks. */
export const DEFAULT_NOTICE_TAINTS: readonly string[] = ['ToBeDeletedByClusterAutoscaler', 'karpenter.sh/disrupted'];

/** Conditions of the node, not announcements (node lifecycle controller, TaintNodesByCondition). */
const CONDITION_TAINTS = new Set([
  'node.kubernetes.io/not-ready',
  'node.kubernetes.io/unreachable',
  'node.kubernetes.io/unschedulable',
  'node.kubernetes.io/memory-pressure',
  'node.kubernetes.io/disk-pressure',
  'node.kubernetes.io/pid-pressure',
  'node.kubernetes.io/network-unavailable',
  'node.cloudprovider.kubernetes.io/uninitialized',
]);

/** The pod's grace period when its spec says none (Kubernetes' default). */
const DEFAULT_GRACE_SECONDS = 30;

export interface DisruptionReading {
  /** The job label's key: a pod without it is not a machine of a job. */
  jobLabel: string;
  roleLabel: string;
  noticeTaints: ReadonlySet<string>;
  /** A pod whose end this adapter caused itself (an isolation, a release): not a notice. */
  causedHere: (pod: V1Pod) => boolean;
  now: number;
}

/** The departures announced now for the job pods given, with their nodes by name. */
export function departuresOf(pods: readonly V1Pod[], nodes: ReadonlyMap<string, V1Node>, reading: DisruptionReading): Departure[] {
  const out: Departure[] = [];
  for (const pod of pods) {
    const jobId = pod.metadata?.labels?.[reading.jobLabel];
    const role = Role.safeParse(pod.metadata?.labels?.[reading.roleLabel]);
    const name = pod.metadata?.name;
    if (!jobId || !role.success || !name || pod.status?.phase !== 'Running' || reading.causedHere(pod)) continue;
    const found = announcement(pod, pod.spec?.nodeName ? nodes.get(pod.spec.nodeName) : undefined, reading);
    if (found)
      out.push({
        jobId,
        machineId: name,
        role: role.data,
        reason: found.reason,
        departsAt: found.departsAt,
        key: `${pod.metadata?.uid ?? name}:${found.cause}`,
      });
  }
  return out;
}

interface Announcement {
  reason: string;
  departsAt: number | null;
  cause: string;
}

function announcement(pod: V1Pod, node: V1Node | undefined, reading: DisruptionReading): Announcement | null {
  const grace = (pod.spec?.terminationGracePeriodSeconds ?? DEFAULT_GRACE_SECONDS) * 1000;
  const deletedBy = timeOf(pod.metadata?.deletionTimestamp);
  const target = pod.status?.conditions?.find((c) => c.type === 'DisruptionTarget' && c.status === 'True');
  if (target) {
    const since = timeOf(target.lastTransitionTime) ?? reading.now;
    return {
      reason: `DisruptionTarget ${target.reason ?? ''}`.trim(),
      departsAt: deletedBy ?? since + grace,
      cause: `DisruptionTarget:${target.reason ?? ''}`,
    };
  }
  if (deletedBy !== null)
    return { reason: `pod deleted (grace ${Math.round((deletedBy - reading.now) / 1000)} s left)`, departsAt: deletedBy, cause: 'deleted' };
  const taints = (node?.spec?.taints ?? [])
    .filter((t) => !CONDITION_TAINTS.has(t.key))
    .map((t) => taintNotice(t, pod.spec?.tolerations ?? [], grace, reading))
    .filter((a): a is Announcement => a !== null)
    // The most pressing first: the earliest deadline, one without a deadline last.
    .sort((a, b) => (a.departsAt ?? Infinity) - (b.departsAt ?? Infinity));
  return taints[0] ?? null;
}

function taintNotice(taint: V1Taint, tolerations: readonly V1Toleration[], grace: number, reading: DisruptionReading): Announcement | null {
  const named = `${taint.key}${taint.value ? `=${taint.value}` : ''}:${taint.effect}`;
  const cause = `taint:${taint.key}:${taint.effect}`;
  const added = timeOf(taint.timeAdded) ?? reading.now;
  if (taint.effect === 'NoExecute') {
    const toleration = tolerations.find((t) => tolerates(t, taint));
    if (!toleration) return { reason: `taint ${named}`, departsAt: added + grace, cause };
    if (toleration.tolerationSeconds != null)
      return { reason: `taint ${named}, tolerated ${toleration.tolerationSeconds} s`, departsAt: added + toleration.tolerationSeconds * 1000 + grace, cause };
  }
  return reading.noticeTaints.has(taint.key) ? { reason: `taint ${named}`, departsAt: null, cause } : null;
}

/** Kubernetes' toleration match: an empty key with `Exists` tolerates every taint; an empty effect every effect. */
function tolerates(t: V1Toleration, taint: V1Taint): boolean {
  if (t.effect && t.effect !== taint.effect) return false;
  if (!t.key) return t.operator === 'Exists';
  if (t.key !== taint.key) return false;
  return t.operator === 'Exists' || (t.value ?? '') === (taint.value ?? '');
}

function timeOf(value: Date | string | undefined | null): number | null {
  if (value == null) return null;
  const ms = value instanceof Date ? value.getTime() : Date.parse(value);
  return Number.isFinite(ms) ? ms : null;
}
