import { DEFAULT_AGENT_LEASE_SECONDS } from '@robustrl/agent';
import type { MessageType } from '@robustrl/contracts';
import { DEFAULT_CONTROLLER_SETTINGS } from '@robustrl/controller-domain';
import { PAPER_DETECTION_DEFAULTS } from '@robustrl/detector-domain';

/**
 * The campaign runs with the product's defaults, sped up by one stated factor for all of them (docs/contributors/chaos.md,
 * "Product timings"): the detection windows a job's JobStarted may set (trainer idle, rollout silent, agent
 * silent, the probe, the grace after a blind interval), the detector's input lag tolerance, the
 * controller's command timeout and the agents' trainer lease are the product's divided by `timeScale`. The router's evidence, the straggler rule and the agents' weight
 * load deadline bound real work, not waiting, and keep the product's values.
 */
export const DEFAULT_TIME_SCALE = 5;
/** The detector's default ROBUSTRL_DETECTOR_INPUT_LAG_TOLERANCE_SECONDS (services/detector/src/detector-runtime.ts). */
const DETECTOR_INPUT_LAG_TOLERANCE_MS = 10_000;

export function campaignTimings(timeScale: number) {
  if (!(timeScale >= 1)) throw new Error(`the time scale must be ≥ 1 (the product's defaults divided by it), got ${timeScale}`);
  const d = PAPER_DETECTION_DEFAULTS;
  const seconds = (ms: number) => Math.round((ms / 1000 / timeScale) * 10) / 10;
  return {
    detection: {
      trainerIdleWindowSeconds: seconds(d.trainerIdleWindowMs),
      rolloutSilentWindowSeconds: seconds(d.rolloutSilentWindowMs),
      agentSilentWindowSeconds: seconds(d.agentSilentWindowMs),
      probeTimeoutSeconds: seconds(d.probeTimeoutMs),
      resumeGraceSeconds: seconds(d.resumeGraceMs),
    },
    /**
     * How far behind its input the detector may read before it counts as blind (services/detector
     * detector-runtime.ts, 10 s by default): scaled with the probe it guards, or a detector seconds behind
     * a slow store would time out probes whose answers it has not read yet.
     */
    inputLagToleranceSeconds: seconds(DETECTOR_INPUT_LAG_TOLERANCE_MS),
    commandTimeoutSeconds: seconds(DEFAULT_CONTROLLER_SETTINGS.commandTimeoutMs),
    /** The agents' trainer lease: inside the control plane's agent-silent window plus probe, as by default. */
    leaseSeconds: seconds(DEFAULT_AGENT_LEASE_SECONDS * 1000),
  };
}

/**
 * What the campaign watches on the bus: every type of the job's control story, of the telemetry the GPU
 * activity, and every input of the ETTR projection (events.jsonl replays the reported ETTR).
 */
export const OBSERVED: MessageType[] = [
  'JobStarted',
  'RolePhaseChanged',
  'TrainingStepStarted',
  'MachineRegistered',
  'MachineRoleChanged',
  'MachineDeregistered',
  'FaultSuspected',
  'FaultConfirmed',
  'SuspicionCleared',
  'DetectionPaused',
  'DetectionResumed',
  'RecoveryDecided',
  'RestartTrainerGroup',
  'PromoteRolloutToTrainer',
  'ReplaceMachine',
  'RestartRolloutEngine',
  'RestartTask',
  'RecoveryCommandSucceeded',
  'RecoveryCommandFailed',
  'RecoveryCompleted',
  'CheckpointSaved',
  'TrainingStepCompleted',
  'TrajectoryRestartedFromPrompt',
  'TrajectoriesReassigned',
  'WeightVersionPublished',
  'GpuActivitySampled',
  // The heartbeat topic's notices and probes: a probe unanswered confirms a silent rollout, and a run
  // kept (--keep) must show which probe went unanswered.
  'AgentFaultSignalled',
  'HeartbeatProbeRequested',
  'HeartbeatAcked',
];
