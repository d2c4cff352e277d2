import { discountBlindInterval } from './blind-interval';
import { DetectionRule, WatchedMachine } from './detection-rule';

export interface StragglerState {
  belowSince: number | null;
  observed: number;
  peerMedian: number;
}

/** Only rollouts with generation work to do are comparable: waiting on tools or idle is not slowness. */
function generating(m: WatchedMachine): boolean {
  const t = m.lastThroughput;
  return t !== null && t.inFlightRequests - t.awaitingTools > 0;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * Straggler rule: a rollout generating far below the median of its generating peers for a window.
 * Reported as a suspicion (the default) because a slow machine still makes progress; the job's
 * settings can ask for replacement instead.
 */
export const StragglerRule: DetectionRule<StragglerState> = {
  name: 'straggler',
  timeWindowed: true,
  appliesTo: (role) => role === 'rollout',
  initialState: () => ({ belowSince: null, observed: 0, peerMedian: 0 }),

  observe(state, message, at, { peers, settings }) {
    if (message.type !== 'RolloutThroughputSampled' || !settings.straggler.enabled) return state;
    const mine = message.data;
    const comparablePeers = peers.filter((p) => p.status === 'watching' && p.role === 'rollout' && generating(p));
    const hasWork = mine.inFlightRequests - mine.awaitingTools > 0;
    if (!hasWork || comparablePeers.length < settings.straggler.minPeers) return { belowSince: null, observed: 0, peerMedian: 0 };
    const peerMedian = median(comparablePeers.map((p) => p.lastThroughput!.tokensPerSecond));
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
};
