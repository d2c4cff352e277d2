import { discountBlindInterval } from './blind-interval';
import { DetectionRule } from './detection-rule';

export interface StragglerState {
  belowSince: number | null;
  observed: number;
  peerMedian: number;
}

/**
 * Straggler rule: a rollout generating far below the median of its generating peers for a window.
 * Reported as a suspicion (the default) because a slow machine still makes progress; the job's
 * settings can ask for replacement instead.
 *
 * The peer median comes from the core's ranking of generating rollouts (`PeerView`, an order-statistics
 * tree): O(log N) a sample instead of filtering and sorting every peer on every sample.
 */
export const StragglerRule: DetectionRule<StragglerState> = {
  name: 'straggler',
  timeWindowed: true,
  appliesTo: (role) => role === 'rollout',
  initialState: () => ({ belowSince: null, observed: 0, peerMedian: 0 }),

  observe(state, message, at, { peers, settings, machine }) {
    if (message.type !== 'RolloutThroughputSampled' || !settings.straggler.enabled) return state;
    // A sample older than the machine's newest one (read again after a restart) is not its present speed.
    if (machine.lastThroughput !== null && at < machine.lastThroughput.at) return state;
    const mine = message.data;
    const hasWork = mine.inFlightRequests - mine.awaitingTools > 0;
    if (!hasWork || peers.generatingRollouts() < settings.straggler.minPeers) return { belowSince: null, observed: 0, peerMedian: 0 };
    const peerMedian = peers.medianTokensPerSecond();
    const below = mine.tokensPerSecond < settings.straggler.ratio * peerMedian;
    return { belowSince: below ? (state.belowSince ?? at) : null, observed: mine.tokensPerSecond, peerMedian };
  },

  evaluate(state, { now, settings }) {
    if (!settings.straggler.enabled || state.belowSince === null || now - state.belowSince < settings.straggler.windowMs) return null;
    const evidence = {
      windowSeconds: settings.straggler.windowMs / 1000,
      faultEvidenceSince: new Date(state.belowSince).toISOString(),
      observed: state.observed,
      peerMedian: state.peerMedian,
      detail: `${state.observed.toFixed(1)} tokens/s against a peer median of ${state.peerMedian.toFixed(1)}`,
    };
    return settings.straggler.action === 'replace'
      ? { verdict: 'confirm', since: state.belowSince, evidence, machineFaulty: false }
      : { verdict: 'suspect', since: state.belowSince, evidence };
  },

  discountBlindness: (state, blind) => (state.belowSince === null ? state : { ...state, belowSince: discountBlindInterval(state.belowSince, blind) }),
  dueAt: (state, { settings }) => (!settings.straggler.enabled || state.belowSince === null ? null : state.belowSince + settings.straggler.windowMs),
};
