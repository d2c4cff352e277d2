import { onOff, seconds, Setting } from '@robustrl/config';
import { Draft, draft } from '@robustrl/contracts';
import { InputGap, InputGapHandling, OutputSpan, shardFromEnv, shardLayoutChangeFromEnv } from '@robustrl/service-kit';
import { createDetectorDecider } from '@robustrl/detector-domain';
import { PAPER_DETECTION_DEFAULTS, ResolvedDetectionSettings } from '@robustrl/detector-domain';

const owner = 'detector';
const window = (name: string, meaning: string, defaultMs: number) => seconds(name, { owner, meaning, default: defaultMs / 1000 });
const P = PAPER_DETECTION_DEFAULTS;

export const TRAINER_IDLE_WINDOW = window(
  'ROBUSTRL_TRAINER_IDLE_WINDOW_SECONDS',
  "default of the trainer rule's window (a job's own settings override it)",
  P.trainerIdleWindowMs,
);
export const ROLLOUT_SILENT_WINDOW = window('ROBUSTRL_ROLLOUT_SILENT_WINDOW_SECONDS', "default of the rollout rule's window", P.rolloutSilentWindowMs);
export const AGENT_SILENT_WINDOW = window(
  'ROBUSTRL_AGENT_SILENT_WINDOW_SECONDS',
  "default of the liveness rule's window (`agentSilentWindowSeconds` per job)",
  P.agentSilentWindowMs,
);
export const PROBE_TIMEOUT = window('ROBUSTRL_PROBE_TIMEOUT_SECONDS', 'default of the heartbeat probe timeout', P.probeTimeoutMs);
export const RESUME_GRACE = window(
  'ROBUSTRL_DETECTOR_RESUME_GRACE_SECONDS',
  'default of the grace after a gap in its input (no window suspects anyone; never longer than the gap)',
  P.resumeGraceMs,
);
export const TICK = window('ROBUSTRL_DETECTOR_TICK_SECONDS', "how often the detector looks at the clock (and samples the bus's health)", 1000);
export const INPUT_GAPS = onOff('ROBUSTRL_DETECTOR_INPUT_GAPS', {
  owner,
  meaning: '`off`: the detector does not watch its input for gaps and counts its own outages as silence (comparison runs only)',
  default: true,
});
export const INPUT_LAG_TOLERANCE = window(
  'ROBUSTRL_DETECTOR_INPUT_LAG_TOLERANCE_SECONDS',
  'records wait and the newest input read is older than this: the detector counts itself blind',
  10_000,
);

/**
 * Service-wide detection defaults from the environment (a job's JobStarted settings override them), how
 * often time is checked, and whether the detector watches its own input for gaps (the readers above).
 */
export function detectorFromEnv(env: NodeJS.ProcessEnv) {
  const ms = (s: Setting<number>) => Math.round(s.read(env) * 1000);
  const defaults: ResolvedDetectionSettings = {
    ...PAPER_DETECTION_DEFAULTS,
    trainerIdleWindowMs: ms(TRAINER_IDLE_WINDOW),
    rolloutSilentWindowMs: ms(ROLLOUT_SILENT_WINDOW),
    agentSilentWindowMs: ms(AGENT_SILENT_WINDOW),
    probeTimeoutMs: ms(PROBE_TIMEOUT),
    resumeGraceMs: ms(RESUME_GRACE),
  };
  const tickIntervalMs = ms(TICK);
  // `off` brings back counting silence through the detector's own outages: for comparison runs only.
  const inputGaps = INPUT_GAPS.read(env) ? detectionGaps(ms(INPUT_LAG_TOLERANCE)) : undefined;
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
