/** The objects the fake Kubernetes API server keeps, in their JSON wire form (fake-kubernetes-api-server.ts). */
export type OwnerKind = 'StatefulSet' | 'ReplicaSet' | 'Deployment';

export interface FakePod {
  apiVersion: 'v1';
  kind: 'Pod';
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    resourceVersion: string;
    creationTimestamp: string;
    deletionTimestamp?: string;
    deletionGracePeriodSeconds?: number;
    labels: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller: boolean }>;
  };
  spec: {
    nodeName?: string;
    containers: Array<{ name: string; image: string }>;
    terminationGracePeriodSeconds?: number;
    tolerations?: Array<{ key?: string; operator?: 'Exists' | 'Equal'; value?: string; effect?: string; tolerationSeconds?: number }>;
  };
  status: {
    phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed';
    /** Set by a test the way the eviction API, the scheduler or the taint manager would (`DisruptionTarget`). */
    conditions?: Array<{ type: string; status: 'True' | 'False'; reason?: string; lastTransitionTime?: string }>;
  };
}

export type WorkloadKind = 'Deployment' | 'ReplicaSet' | 'StatefulSet';

export interface FakeWorkload {
  apiVersion: 'apps/v1';
  kind: WorkloadKind;
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    resourceVersion: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller: boolean }>;
  };
  spec: { replicas: number; template: { metadata: { labels: Record<string, string> } }; ordinals?: { start: number } };
}

export const POD_DELETION_COST_ANNOTATION = 'controller.kubernetes.io/pod-deletion-cost';

export const WORKLOAD_RESOURCES: Record<string, WorkloadKind> = { deployments: 'Deployment', replicasets: 'ReplicaSet', statefulsets: 'StatefulSet' };

export interface FakeNode {
  apiVersion: 'v1';
  kind: 'Node';
  metadata: { name: string; uid: string; resourceVersion: string; labels: Record<string, string>; annotations?: Record<string, string> };
  spec: {
    unschedulable?: boolean;
    taints?: Array<{ key: string; value?: string; effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute'; timeAdded?: string }>;
  };
}

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType?: string;
  body?: unknown;
}

export interface InjectedFailure {
  method?: string;
  /** Matched against the request path (without the query string). */
  path?: RegExp;
  status: number;
  /** How many matching requests fail; unlimited when absent. */
  times?: number;
  message?: string;
}

export interface FakeApiServerOptions {
  token?: string;
  /** Delay between a pod's deletion and its replacement's creation (Pending, unscheduled). */
  replacementDelayMs?: number;
  /** Delay between a replacement being scheduled onto a node and it reporting Running. */
  runningDelayMs?: number;
  /** How long a deleted pod stays visible with a deletionTimestamp (its grace period); 0 removes it at once. */
  terminationMs?: number;
  /** A machine pod asks for all of a node's accelerators, so by default a node holds one pod. */
  podsPerNode?: number;
}

/** The node label the simulated scheduler matches against a pod's `robustrl.io/zone` label. */
export const ZONE_NODE_LABEL = 'topology.kubernetes.io/zone';
