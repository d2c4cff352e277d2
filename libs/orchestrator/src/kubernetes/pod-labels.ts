/** The labels and annotations the Kubernetes adapter reads and writes (libs/orchestrator/README.md, "Kubernetes adapter"). */
export const PodLabels = {
  job: 'robustrl.io/job',
  role: 'robustrl.io/role',
  zone: 'robustrl.io/zone',
  hardwareClass: 'robustrl.io/hardware-class',
} as const;

export const NodeAnnotations = {
  operation: 'robustrl.io/operation',
  isolatedMachine: 'robustrl.io/isolated-machine',
  isolationReason: 'robustrl.io/isolation-reason',
} as const;

/** Written on a StatefulSet or Deployment whose replicas this adapter changed: the last such change. */
export const OwnerAnnotations = {
  operation: 'robustrl.io/operation',
  scaleReason: 'robustrl.io/scale-reason',
} as const;

/** Written on a pod that releaseMachine gives back. */
export const PodAnnotations = {
  /** Read by the ReplicaSet controller (PodDeletionCost, on by default since Kubernetes 1.22): lowest goes first on scale-down. */
  deletionCost: 'controller.kubernetes.io/pod-deletion-cost',
  operation: 'robustrl.io/operation',
  releaseReason: 'robustrl.io/release-reason',
} as const;
