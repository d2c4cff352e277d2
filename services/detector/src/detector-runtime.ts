import { z } from 'zod';
import { Draft } from '@robustrl/contracts';
import { OutputSpan } from '@robustrl/service-kit';
import { createDetectorDecider } from '@robustrl/detector-domain';
import { PAPER_DETECTION_DEFAULTS, ResolvedDetectionSettings } from '@robustrl/detector-domain';

const Seconds = z.coerce.number().positive();

/**
 * Service-wide detection defaults from the environment (a job's JobStarted settings override them):
 * ROBUSTRL_TRAINER_IDLE_WINDOW_SECONDS, ROBUSTRL_ROLLOUT_SILENT_WINDOW_SECONDS,
 * ROBUSTRL_PROBE_TIMEOUT_SECONDS, ROBUSTRL_DETECTOR_TICK_SECONDS (how often time is checked, default 1).
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
    probeTimeoutMs: seconds('ROBUSTRL_PROBE_TIMEOUT_SECONDS', PAPER_DETECTION_DEFAULTS.probeTimeoutMs),
  };
  const tickIntervalMs = seconds('ROBUSTRL_DETECTOR_TICK_SECONDS', 1000);
  return { decider: createDetectorDecider({ defaults }), defaults, tickIntervalMs };
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
