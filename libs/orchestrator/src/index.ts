export * from './orchestrator';
export * from './departures';
export { DEFAULT_NOTICE_TAINTS, departuresOf, type DisruptionReading } from './kubernetes/disruption-notices';
export {
  KubernetesOrchestrator,
  type KubernetesOrchestratorOptions,
  PodLabels,
  NodeAnnotations,
  OwnerAnnotations,
  PodAnnotations,
} from './kubernetes/kubernetes-orchestrator';
export {
  LocalProcessSupervisor,
  type LocalProcessSupervisorOptions,
  type LocalLaunchCommand,
  type LocalMachineLaunch,
  type LocalMachineSnapshot,
  type LocalMachineStatus,
  type LocalMachineExit,
} from './local/local-process-supervisor';
export * from './from-env';
export { HttpOrchestrator, serveOrchestrator } from './http/orchestrator-http';
