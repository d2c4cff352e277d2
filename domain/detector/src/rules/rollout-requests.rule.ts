import { DetectionRule } from './detection-rule';

export interface RolloutRequestsState {
  /** From the router's last report: how long the engine had produced no token with requests open. */
  idleForMs: number;
  openRequests: number;
  /** When that idleness began (report time − idleForMs). */
  idleSince: number | null;
  /** Failed requests since the last answered one, and when the run began. */
  failedInARow: number;
  failingSince: number | null;
  lastFailure: string | null;
}

/**
 * Rollout rule from the router's evidence (NeMo-RL condemns a generation shard after 3 failed
 * requests, vLLM and SGLang health endpoints answer from a thread that outlives a wedged scheduler): an
 * engine is confirmed faulty when the router reports that it produced no token for the stall window
 * while requests were open at it, or that its requests failed the threshold times in a row. The agent's
 * heartbeat cannot clear this — the agent lives on a machine whose engine is wedged — which is why it
 * confirms rather than probes. A trajectory waiting on a tool has no request open at the engine, so tool
 * waits never look like a stall.
 *
 * It concludes on the router's reports alone, not on the passing of time: a router that stops
 * reporting (it died) leaves no evidence against the engine, so there is no deadline (`dueAt` null).
 */
export const RolloutRequestsRule: DetectionRule<RolloutRequestsState> = {
  name: 'rollout-requests',
  timeWindowed: false,
  appliesTo: (role) => role === 'rollout' || role === 'hybrid',
  initialState: () => ({ idleForMs: 0, openRequests: 0, idleSince: null, failedInARow: 0, failingSince: null, lastFailure: null }),

  observe(state, message, at) {
    if (message.type !== 'RolloutRequestsObserved') return state;
    const d = message.data;
    const idle = d.openRequests > 0 ? d.idleForMs : 0;
    const answered = d.succeededRequests > 0;
    // A window with an answer ends the run: in it, failures and answers interleave in an order the report does not keep.
    const failedInARow = answered ? 0 : state.failedInARow + d.failedRequests;
    return {
      idleForMs: idle,
      openRequests: d.openRequests,
      idleSince: idle > 0 ? at - idle : null,
      failedInARow,
      failingSince: failedInARow === 0 ? null : (state.failingSince ?? at - d.windowSeconds * 1000),
      lastFailure: d.failedRequests > 0 ? d.lastFailure : state.lastFailure,
    };
  },

  evaluate(state, { settings }) {
    if (state.idleSince !== null && state.idleForMs >= settings.rolloutStallWindowMs) {
      return {
        verdict: 'confirm',
        since: state.idleSince,
        machineFaulty: false,
        evidence: {
          windowSeconds: settings.rolloutStallWindowMs / 1000,
          faultEvidenceSince: new Date(state.idleSince).toISOString(),
          observed: state.openRequests,
          detail: `the router saw no token from the engine for ${Math.round(state.idleForMs / 1000)} s with ${state.openRequests} request(s) open at it`,
        },
      };
    }
    if (state.failingSince !== null && state.failedInARow >= settings.rolloutFailedRequestsThreshold) {
      return {
        verdict: 'confirm',
        since: state.failingSince,
        machineFaulty: false,
        evidence: {
          faultEvidenceSince: new Date(state.failingSince).toISOString(),
          observed: state.failedInARow,
          detail: `${state.failedInARow} requests in a row failed on the engine, none answered${state.lastFailure ? ` (last: ${state.lastFailure})` : ''}`,
        },
      };
    }
    return null;
  },

  discountBlindness: (state) => state,
  dueAt: () => null,
};
