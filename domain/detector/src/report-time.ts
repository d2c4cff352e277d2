import { MACHINE_OBSERVATIONS } from './rules';
import type { DetectorEvent } from './detector.state';

/**
 * When the detector heard a report (docs/contributors/detection.md): the time the machine's clock wrote on it,
 * bounded by when the report arrived (`now`, the detector's own clock) — a machine's clock can be
 * minutes off, the detector judges liveness by its own.
 *
 *  - No machine report lies in the future: a clock ahead would keep a dead machine's last report
 *    "fresh" for as long as its clock is ahead, and hold its verdict back that long.
 *  - A periodic sample counts as heard when it arrived, at most REPORT_LAG_MS before: from a clock
 *    behind, every sample would read as minutes old and a healthy machine as silent. Samples are what
 *    the silence and idle windows run on; a late sample proves the agent was alive to send it.
 *  - Every other report keeps its own time when that lies in the past: a registration or a phase is
 *    compared with the restarts around it, and a late one must not pass for a new one.
 *
 * Replays of stored facts (a restarted detector catching up, while it is blind) use the reports' own
 * times: the bound applies to what the detector observes as it arrives.
 */
export const REPORT_LAG_MS = 5_000;

const SAMPLES: ReadonlySet<string> = new Set(['GpuActivitySampled', 'RolloutThroughputSampled']);
const MACHINE_REPORTS: ReadonlySet<string> = new Set(MACHINE_OBSERVATIONS);

export function reportTime(event: DetectorEvent, now: number): number {
  const written = Date.parse(event.occurredAt);
  if (!MACHINE_REPORTS.has(event.type)) return written;
  if (written > now) return now;
  return SAMPLES.has(event.type) ? Math.max(written, now - REPORT_LAG_MS) : written;
}
