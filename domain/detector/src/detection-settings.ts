import type { DetectionSettings } from '@robustrl/contracts';

/** Detection settings with every default filled in; all durations in milliseconds. */
export interface ResolvedDetectionSettings {
  trainerIdleWindowMs: number;
  rolloutSilentWindowMs: number;
  /** Router evidence: no token for this long while requests are open at the engine (keep it above the longest prefill a saturated engine may do). */
  rolloutStallWindowMs: number;
  /** Router evidence: failed requests in a row (no answer between) that condemn an engine. */
  rolloutFailedRequestsThreshold: number;
  /** Liveness rule: no report from a machine's agent for this long before a heartbeat probe. */
  agentSilentWindowMs: number;
  probeTimeoutMs: number;
  /** After the detector was blind, no time-based window may suspect a machine for this long (or for as long as the gap, if shorter). */
  resumeGraceMs: number;
  straggler: { enabled: boolean; ratio: number; windowMs: number; minPeers: number; action: 'report' | 'replace' };
}

/**
 * Defaults from the paper (§4): 300 s of zero TensorCore activity in the training phase for a
 * trainer, 60 s of zero throughput for a rollout. The probe timeout and the straggler rule are ours:
 * 10 s is several round trips of a loaded agent; a rollout at a fifth of its peers' median for 5
 * minutes is "far below" without reacting to one long prompt. The liveness window is ours too: six
 * of the agent's default 10 s GPU reports missed, the same minute the paper gives a silent rollout.
 * The grace after a blind interval is also ours: 30 s lets every agent's first samples after the gap
 * (its producer reconnecting) arrive. The router's evidence: 10 s without a token while
 * requests are open is far past a decode step and a queue wait behind running requests (those progress);
 * 3 failed requests in a row is NeMo-RL's count.
 */
export const PAPER_DETECTION_DEFAULTS: ResolvedDetectionSettings = {
  trainerIdleWindowMs: 300_000,
  rolloutSilentWindowMs: 60_000,
  rolloutStallWindowMs: 10_000,
  rolloutFailedRequestsThreshold: 3,
  agentSilentWindowMs: 60_000,
  probeTimeoutMs: 10_000,
  resumeGraceMs: 30_000,
  straggler: { enabled: true, ratio: 0.2, windowMs: 300_000, minPeers: 3, action: 'report' },
};

/** Job settings (from its JobStarted event) over the service's defaults. */
export function resolveDetectionSettings(
  job: DetectionSettings | undefined,
  defaults: ResolvedDetectionSettings = PAPER_DETECTION_DEFAULTS,
): ResolvedDetectionSettings {
  const s = job?.straggler;
  const ms = (seconds: number | undefined, fallback: number) => (seconds === undefined ? fallback : Math.round(seconds * 1000));
  return {
    trainerIdleWindowMs: ms(job?.trainerIdleWindowSeconds, defaults.trainerIdleWindowMs),
    rolloutSilentWindowMs: ms(job?.rolloutSilentWindowSeconds, defaults.rolloutSilentWindowMs),
    rolloutStallWindowMs: ms(job?.rolloutStallWindowSeconds, defaults.rolloutStallWindowMs),
    rolloutFailedRequestsThreshold: job?.rolloutFailedRequestsThreshold ?? defaults.rolloutFailedRequestsThreshold,
    agentSilentWindowMs: ms(job?.agentSilentWindowSeconds, defaults.agentSilentWindowMs),
    probeTimeoutMs: ms(job?.probeTimeoutSeconds, defaults.probeTimeoutMs),
    resumeGraceMs: ms(job?.resumeGraceSeconds, defaults.resumeGraceMs),
    straggler: {
      enabled: s?.enabled ?? defaults.straggler.enabled,
      ratio: s?.ratio ?? defaults.straggler.ratio,
      windowMs: ms(s?.windowSeconds, defaults.straggler.windowMs),
      minPeers: s?.minPeers ?? defaults.straggler.minPeers,
      action: s?.action ?? defaults.straggler.action,
    },
  };
}
