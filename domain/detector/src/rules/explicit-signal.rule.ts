import type { FaultSignal } from '@robustrl/contracts';
import { DetectionRule } from './detection-rule';

export interface ExplicitSignalState {
  /** `since`: when the evidence began (absent in a state folded before signals carried it). */
  signal: { kind: FaultSignal; at: number; since?: number; detail: string; exitCode: number | null; departsAt?: number } | null;
}

/**
 * ECC and XID errors are the GPU's own hardware evidence, and a drained node is leaving: the machine, not
 * the process, must go.
 */
const MACHINE_SIGNALS: ReadonlySet<FaultSignal> = new Set(['ecc-error', 'xid-error', 'node-draining']);

/**
 * Explicit signals from the agent (role process exited, ECC/XID error, exception in the step)
 * confirm at once: there is nothing to wait for (paper §4, explicit failures).
 */
export const ExplicitSignalRule: DetectionRule<ExplicitSignalState> = {
  name: 'explicit-signal',
  // A signal is evidence in itself: it confirms even while the detector is blind to the rest of the input.
  timeWindowed: false,
  appliesTo: () => true,
  initialState: () => ({ signal: null }),

  observe(state, message, at) {
    if (message.type !== 'AgentFaultSignalled') return state;
    const d = message.data;
    // The fault began when the agent's evidence did (a load's start), not when it gave up waiting: the
    // verdict's detection latency, and the outage ETTR charges, run from there (paper §7).
    // A notice's deadline on the detector's clock: the arrival plus the time left the agent reported.
    const departsAt = d.departsInMs !== undefined ? { departsAt: at + d.departsInMs } : {};
    return { signal: { kind: d.signal, at, since: at - (d.evidenceForMs ?? 0), detail: d.detail, exitCode: d.exitCode, ...departsAt } };
  },

  evaluate(state) {
    const s = state.signal;
    if (s === null) return null;
    const since = Math.min(s.since ?? s.at, s.at);
    return {
      verdict: 'confirm',
      since,
      machineFaulty: MACHINE_SIGNALS.has(s.kind),
      evidence: {
        signal: s.kind,
        faultEvidenceSince: new Date(since).toISOString(),
        detail: s.exitCode === null ? s.detail : `${s.detail} (exit code ${s.exitCode})`,
        ...(s.departsAt !== undefined ? { departsAt: new Date(s.departsAt).toISOString() } : {}),
      },
    };
  },

  discountBlindness: (state) => state,
  // Due at once: a signal confirms when it is observed; a tick only catches one folded without a decision.
  dueAt: (state) => state.signal?.at ?? null,
};
