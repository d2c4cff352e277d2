import type { MessageType } from './catalog';

/**
 * Telemetry that is an input to windows, not a fact to keep (docs/contributors/snapshots.md "Telemetry is not a fact"): a
 * deciding service folds these and decides on them, but keeps them in neither its inbox nor the event
 * log — the verdicts, probes and decisions they lead to are the facts, and carry the evidence that
 * justified them. The bus keeps samples for its retention; a restarted service reads the ones after
 * its last snapshot again from there.
 */
export const SAMPLE_TYPES = ['GpuActivitySampled', 'RolloutThroughputSampled', 'RolloutRequestsObserved'] as const satisfies readonly MessageType[];

const SAMPLES: ReadonlySet<string> = new Set(SAMPLE_TYPES);

export const isSample = (type: string): boolean => SAMPLES.has(type);
