import { discountBlindInterval } from './blind-interval';
import { DetectionRule } from './detection-rule';

export interface AgentSilentState {
  /**
   * When the agent was last heard from (a periodic GPU sample, a phase report, a probe answer); null
   * until its first periodic sample: an agent that never sends them has no heartbeat to lose.
   */
  heardAt: number | null;
}

/**
 * Liveness rule: the agent on every GPU machine reports GPU activity on a fixed period
 * whatever its role and phase, so a report that stops, then an unanswered heartbeat probe, means the
 * machine (or its agent) is gone. It covers what the role rules pause for: a trainer that dies during a
 * weight update, a checkpoint or while waiting for its batch, and a rollout whose engine the router
 * still counts as waiting on tools. Long tool waits, weight updates and checkpoints keep the agent
 * reporting, so they never look silent; an agent that is alive but late answers the probe, which
 * restarts the window.
 */
export const AgentSilentRule: DetectionRule<AgentSilentState> = {
  name: 'agent-silent',
  timeWindowed: true,
  appliesTo: () => true,
  initialState: () => ({ heardAt: null }),

  observe(state, message, at) {
    switch (message.type) {
      case 'GpuActivitySampled':
        return { heardAt: Math.max(state.heardAt ?? at, at) };
      case 'RolePhaseChanged':
      case 'HeartbeatAcked':
      case 'AgentFaultSignalled':
        // Signs of life, but not the heartbeat itself: they keep an armed window open, they do not arm it.
        return state.heardAt === null ? state : { heardAt: Math.max(state.heardAt, at) };
      default:
        return state;
    }
  },

  evaluate(state, { now, settings }) {
    if (state.heardAt === null || now - state.heardAt < settings.agentSilentWindowMs) return null;
    const since = new Date(state.heardAt).toISOString();
    return {
      verdict: 'probe',
      since: state.heardAt,
      evidence: {
        windowSeconds: settings.agentSilentWindowMs / 1000,
        lastActivityAt: since,
        faultEvidenceSince: since,
        detail: `no report from the machine's agent for ${Math.round((now - state.heardAt) / 1000)} s`,
      },
    };
  },

  discountBlindness: (state, blind) => (state.heardAt === null ? state : { heardAt: discountBlindInterval(state.heardAt, blind) }),
  dueAt: (state, { settings }) => (state.heardAt === null ? null : state.heardAt + settings.agentSilentWindowMs),
};
