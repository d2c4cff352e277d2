import { z } from 'zod';
import { Draft, draft } from '@robustrl/contracts';
import { InputGap, InputGapHandling, OutputSpan, shardFromEnv, shardLayoutChangeFromEnv } from '@robustrl/service-kit';
import { createDetectorDecider } from '@robustrl/detector-domain';
import { PAPER_DETECTION_DEFAULTS, ResolvedDetectionSettings } from '@robustrl/detector-domain';

const Seconds = z.coerce.number().positive();

/**
 * Service-wide detection defaults from the environment (a job's JobStarted settings override them):
 * ROBUSTRL_TRAINER_IDLE_WINDOW_SECONDS, ROBUSTRL_ROLLOUT_SILENT_WINDOW_SECONDS, ROBUSTRL_AGENT_SILENT_WINDOW_SECONDS,
 * ROBUSTRL_PROBE_TIMEOUT_SECONDS, ROBUSTRL_DETECTOR_RESUME_GRACE_SECONDS, ROBUSTRL_DETECTOR_TICK_SECONDS (how
 * often time is checked, default 1), ROBUSTRL_DETECTOR_INPUT_LAG_TOLERANCE_SECONDS (how old the newest input read
 * may be while records wait before the detector counts itself blind, default 10), ROBUSTRL_DETECTOR_INPUT_GAPS
 * (`off`: do not watch the input for gaps — for comparison runs).
 */
export function detectorFromEnv(env: NodeJS.ProcessEnv) {
  const seconds = (name: string, fallbackMs: number) => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallbackMs;
    const parsed = Seconds.safeParse(raw);
    if (!parsed.success) throw new Error(`${name} must be a positive number of seconds, got '${raw}'`);
    return Math.round(parsed.data * 1000);
  };
  const defaults: ResolvedDetectionSettings = {
    ...PAPER_DETECTION_DEFAULTS,
    trainerIdleWindowMs: seconds('ROBUSTRL_TRAINER_IDLE_WINDOW_SECONDS', PAPER_DETECTION_DEFAULTS.trainerIdleWindowMs),
    rolloutSilentWindowMs: seconds('ROBUSTRL_ROLLOUT_SILENT_WINDOW_SECONDS', PAPER_DETECTION_DEFAULTS.rolloutSilentWindowMs),
    agentSilentWindowMs: seconds('ROBUSTRL_AGENT_SILENT_WINDOW_SECONDS', PAPER_DETECTION_DEFAULTS.agentSilentWindowMs),
    probeTimeoutMs: seconds('ROBUSTRL_PROBE_TIMEOUT_SECONDS', PAPER_DETECTION_DEFAULTS.probeTimeoutMs),
    resumeGraceMs: seconds('ROBUSTRL_DETECTOR_RESUME_GRACE_SECONDS', PAPER_DETECTION_DEFAULTS.resumeGraceMs),
  };
  const tickIntervalMs = seconds('ROBUSTRL_DETECTOR_TICK_SECONDS', 1000);
  const watch = env.ROBUSTRL_DETECTOR_INPUT_GAPS ?? 'on';
  if (watch !== 'on' && watch !== 'off') throw new Error(`ROBUSTRL_DETECTOR_INPUT_GAPS must be 'on' or 'off', got '${watch}'`);
  // `off` brings back counting silence through the detector's own outages: for comparison runs only.
  const inputGaps = watch === 'on' ? detectionGaps(seconds('ROBUSTRL_DETECTOR_INPUT_LAG_TOLERANCE_SECONDS', 10_000)) : undefined;
  // Jobs spread over detector processes by partition (docs/contributors/snapshots.md "Sharding the detector").
  const shard = shardFromEnv(env);
  return { decider: createDetectorDecider({ defaults }), defaults, tickIntervalMs, inputGaps, shard, shardLayoutChange: shardLayoutChangeFromEnv(env) };
}

/** A gap in the detector's own input becomes DetectionPaused / DetectionResumed in every job (docs/contributors/detection.md "Detection knows when it is blind"). */
export function detectionGaps(lagToleranceMs: number): InputGapHandling {
  return {
    lagToleranceMs,
    paused: (gap: InputGap) => draft('DetectionPaused', { reason: gap.reason, blindSince: new Date(gap.since).toISOString(), detail: gap.detail }),
    resumed: (gap: InputGap, at: number) =>
      draft('DetectionResumed', {
        reason: gap.reason,
        blindSince: new Date(gap.since).toISOString(),
        resumedAt: new Date(at).toISOString(),
        blindMs: Math.max(0, Math.round(at - gap.since)),
      }),
  };
}

/**
 * A verdict reached by the passage of time has no inbound message to continue a trace from, so its
 * trace starts with a span covering the evidence window itself: evidence → verdict → decision → restart.
 */
export function evidenceSpanForVerdicts(drafts: readonly Draft[], now: number): OutputSpan | null {
  const verdict = drafts.find((d): d is Draft<'FaultConfirmed'> => d.type === 'FaultConfirmed');
  if (!verdict) return null;
  const since = verdict.data.evidence.faultEvidenceSince;
  return {
    name: `evidence ${verdict.data.rule}`,
    startTime: since ? Date.parse(since) : now - verdict.data.detectionLatencyMs,
    attributes: { 'robustrl.machine_id': verdict.data.machineId, 'robustrl.rule': verdict.data.rule, 'robustrl.verdict_id': verdict.data.verdictId },
  };
}
