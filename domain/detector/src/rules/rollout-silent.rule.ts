import { discountBlindInterval } from './blind-interval';
import { DetectionRule } from './detection-rule';

export interface RolloutSilentState {
  /** Last sign of progress: output produced, or an acked heartbeat probe. */
  silentSince: number;
}

/**
 * Rollout rule (paper §4 ➀➁): zero throughput for the window makes the machine a suspect, and only
 * an unanswered heartbeat probe confirms it. Zero throughput alone is normal — a rollout waiting on
 * tool calls (for any length) or idle between batches produces nothing — so the probe decides, and an
 * ack restarts the window: a live, waiting rollout is probed once per window and never flagged.
 * Applies to hybrid machines too (paper §4); the core hands their faults to the trainer path.
 */
export const RolloutSilentRule: DetectionRule<RolloutSilentState> = {
  name: 'rollout-silent',
  timeWindowed: true,
  appliesTo: (role) => role === 'rollout' || role === 'hybrid',
  initialState: (at) => ({ silentSince: at }),

  observe(state, message, at) {
    if (message.type === 'RolloutThroughputSampled') {
      const progressed = message.data.tokensPerSecond > 0 || message.data.completedRequests > 0;
      return progressed ? { silentSince: Math.max(state.silentSince, at) } : state;
    }
    if (message.type === 'HeartbeatAcked') return { silentSince: Math.max(state.silentSince, at) };
    return state;
  },

  evaluate(state, { now, machine, settings }) {
    if (now - state.silentSince < settings.rolloutSilentWindowMs) return null;
    return {
      verdict: 'probe',
      since: state.silentSince,
      evidence: {
        windowSeconds: settings.rolloutSilentWindowMs / 1000,
        lastActivityAt: new Date(state.silentSince).toISOString(),
        faultEvidenceSince: new Date(state.silentSince).toISOString(),
        observed: machine.lastThroughput?.tokensPerSecond ?? 0,
        detail: `no rollout throughput for ${Math.round((now - state.silentSince) / 1000)} s`,
      },
    };
  },

  discountBlindness: (state, blind) => ({ silentSince: discountBlindInterval(state.silentSince, blind) }),
  dueAt: (state, { settings }) => state.silentSince + settings.rolloutSilentWindowMs,
};
