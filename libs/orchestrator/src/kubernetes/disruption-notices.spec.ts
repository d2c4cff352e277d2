import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { DEFAULT_NOTICE_TAINTS, departuresOf, DisruptionReading } from './disruption-notices';

const NOW = Date.parse('2026-11-29T12:00:00Z');
const at = (secondsFromNow: number) => new Date(NOW + secondsFromNow * 1000).toISOString();

const pod = (
  over: {
    name?: string;
    phase?: string;
    deletion?: string;
    conditions?: object[];
    tolerations?: object[];
    grace?: number;
    labels?: Record<string, string>;
  } = {},
): V1Pod =>
  ({
    metadata: {
      name: over.name ?? 'job-1-trainer-0',
      uid: `uid-${over.name ?? 'job-1-trainer-0'}`,
      labels: over.labels ?? { 'robustrl.io/job': 'job-1', 'robustrl.io/role': 'trainer' },
      ...(over.deletion ? { deletionTimestamp: over.deletion } : {}),
    },
    spec: { nodeName: 'gpu-0', containers: [], tolerations: over.tolerations, terminationGracePeriodSeconds: over.grace },
    status: { phase: over.phase ?? 'Running', conditions: over.conditions },
  }) as unknown as V1Pod;

const node = (...taints: object[]): Map<string, V1Node> => new Map([['gpu-0', { metadata: { name: 'gpu-0' }, spec: { taints } } as unknown as V1Node]]);

const reading = (over: Partial<DisruptionReading> = {}): DisruptionReading => ({
  jobLabel: 'robustrl.io/job',
  roleLabel: 'robustrl.io/role',
  noticeTaints: new Set(DEFAULT_NOTICE_TAINTS),
  causedHere: () => false,
  now: NOW,
  ...over,
});

const evicted = { type: 'DisruptionTarget', status: 'True', reason: 'EvictionByEvictionAPI', lastTransitionTime: at(-2) };

describe('departuresOf (what a Kubernetes cluster announces)', () => {
  it("an eviction (a drain): the DisruptionTarget condition, due when the pod's deletion is", () => {
    const [d, ...rest] = departuresOf([pod({ conditions: [evicted], deletion: at(28) })], node(), reading());
    expect(rest).toEqual([]);
    expect(d).toEqual({
      jobId: 'job-1',
      machineId: 'job-1-trainer-0',
      role: 'trainer',
      reason: 'DisruptionTarget EvictionByEvictionAPI',
      departsAt: NOW + 28_000,
      key: 'uid-job-1-trainer-0:DisruptionTarget:EvictionByEvictionAPI',
    });
  });

  it('a DisruptionTarget not yet followed by the deletion: due a grace period after the condition', () => {
    const preempted = { ...evicted, reason: 'PreemptionByScheduler' };
    const [d] = departuresOf([pod({ conditions: [preempted], grace: 60 })], node(), reading());
    expect(d).toMatchObject({ reason: 'DisruptionTarget PreemptionByScheduler', departsAt: NOW - 2_000 + 60_000 });
  });

  it('a condition that is False announces nothing', () => {
    expect(departuresOf([pod({ conditions: [{ ...evicted, status: 'False' }] })], node(), reading())).toEqual([]);
  });

  it('a plain deletion (an owner scaled down by someone else): due at its deletionTimestamp', () => {
    const [d] = departuresOf([pod({ deletion: at(30) })], node(), reading());
    expect(d).toMatchObject({ reason: 'pod deleted (grace 30 s left)', departsAt: NOW + 30_000, key: 'uid-job-1-trainer-0:deleted' });
  });

  it("a NoExecute taint the pod does not tolerate: evicted at once, so due the pod's grace after the taint", () => {
    const [d] = departuresOf([pod({ grace: 45 })], node({ key: 'nvidia.com/gpu-health', value: 'xid-79', effect: 'NoExecute', timeAdded: at(-1) }), reading());
    expect(d).toMatchObject({
      reason: 'taint nvidia.com/gpu-health=xid-79:NoExecute',
      departsAt: NOW - 1_000 + 45_000,
      key: 'uid-job-1-trainer-0:taint:nvidia.com/gpu-health:NoExecute',
    });
  });

  it('a NoExecute taint tolerated for a while: due when the toleration runs out, plus the grace', () => {
    const tolerations = [{ key: 'maintenance', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 120 }];
    const [d] = departuresOf([pod({ tolerations, grace: 30 })], node({ key: 'maintenance', effect: 'NoExecute', timeAdded: at(0) }), reading());
    expect(d).toMatchObject({ departsAt: NOW + 150_000, reason: 'taint maintenance:NoExecute, tolerated 120 s' });
  });

  it('a NoExecute taint tolerated for ever, or by a blanket toleration, announces nothing', () => {
    const taint = { key: 'dedicated', value: 'rl', effect: 'NoExecute' };
    expect(departuresOf([pod({ tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'rl' }] })], node(taint), reading())).toEqual([]);
    expect(departuresOf([pod({ tolerations: [{ operator: 'Exists' }] })], node(taint), reading())).toEqual([]);
    // The wrong value does not tolerate it.
    expect(departuresOf([pod({ tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'other' }] })], node(taint), reading())).toHaveLength(1);
  });

  it("an autoscaler's scale-down mark is a notice without a deadline; another NoSchedule taint is not", () => {
    const [d] = departuresOf([pod()], node({ key: 'ToBeDeletedByClusterAutoscaler', value: '1732881600', effect: 'NoSchedule' }), reading());
    expect(d).toMatchObject({ departsAt: null, reason: 'taint ToBeDeletedByClusterAutoscaler=1732881600:NoSchedule' });
    expect(departuresOf([pod()], node({ key: 'dedicated', effect: 'NoSchedule' }), reading())).toEqual([]);
    // A health controller's own key, once configured.
    const configured = reading({ noticeTaints: new Set(['example.com/health-quarantine']) });
    expect(departuresOf([pod()], node({ key: 'example.com/health-quarantine', effect: 'NoSchedule' }), configured)).toHaveLength(1);
  });

  it("the node lifecycle controller's taints are a failure the detector hears, not a notice; a cordon is not one either", () => {
    const taints = [
      { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute', timeAdded: at(-5) },
      { key: 'node.kubernetes.io/not-ready', effect: 'NoExecute', timeAdded: at(-5) },
      { key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' },
    ];
    expect(departuresOf([pod()], node(...taints), reading())).toEqual([]);
  });

  it('of several announcements the most pressing is the one reported', () => {
    const taints = [
      { key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' },
      { key: 'late', effect: 'NoExecute', timeAdded: at(100) },
      { key: 'soon', effect: 'NoExecute', timeAdded: at(10) },
    ];
    expect(departuresOf([pod()], node(...taints), reading())[0]).toMatchObject({ reason: 'taint soon:NoExecute' });
    // An eviction beats any taint.
    expect(departuresOf([pod({ conditions: [evicted], deletion: at(5) })], node(...taints), reading())[0]).toMatchObject({
      reason: 'DisruptionTarget EvictionByEvictionAPI',
    });
  });

  it('only running pods of a job, and never a pod whose end the adapter caused', () => {
    const deleted = { deletion: at(30) };
    expect(departuresOf([pod({ ...deleted, phase: 'Pending' }), pod({ ...deleted, phase: 'Failed' })], node(), reading())).toEqual([]);
    expect(departuresOf([pod({ ...deleted, labels: { 'robustrl.io/role': 'trainer' } })], node(), reading())).toEqual([]);
    expect(departuresOf([pod({ ...deleted, labels: { 'robustrl.io/job': 'job-1', 'robustrl.io/role': 'driver' } })], node(), reading())).toEqual([]);
    expect(departuresOf([pod(deleted)], node(), reading({ causedHere: (p) => p.metadata?.name === 'job-1-trainer-0' }))).toEqual([]);
  });

  it('one announcement keeps its key however often it is read; a new announcement on the same pod has a new one', () => {
    const taint = { key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' };
    const first = departuresOf([pod()], node(taint), reading())[0]!;
    const again = departuresOf([pod()], node(taint), reading({ now: NOW + 5_000 }))[0]!;
    const evictedLater = departuresOf([pod({ conditions: [evicted], deletion: at(30) })], node(taint), reading())[0]!;
    expect(again.key).toBe(first.key);
    expect(evictedLater.key).not.toBe(first.key);
  });
});
