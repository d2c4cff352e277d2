import type { DataOf } from '@robustrl/contracts';

type Sample = DataOf<'RolloutThroughputSampled'>;

/** One router's latest sample of a rollout, and when it was taken. */
export interface ThroughputShare {
  at: number;
  data: Sample;
}

/** By reporting router (the sample's `source`): a rollout's requests may pass through several. */
export type ThroughputShares = Record<string, ThroughputShare>;

/** A router's share counts toward a rollout's throughput for this many of its windows after it was taken. */
export const SHARE_FRESH_WINDOWS = 2;

/**
 * A rollout's throughput when several routers serve it (router replicas, docs/router.md "Scaling out"):
 * each router counts only the requests it forwarded, so one router's sample is a share, and the
 * rollout's throughput is the sum of every router's latest share that is still fresh. With one router,
 * its sample is the whole and is returned as it is. A share older than the router's newest is ignored
 * (read again after a restart). Updates `shares` in place (samples are the detector's hot path) and
 * returns them, created on the first sample.
 */
export function combineShares(
  shares: ThroughputShares | undefined,
  reporter: string,
  at: number,
  data: Sample,
): { shares: ThroughputShares; combined: Sample } {
  if (shares === undefined) return { shares: { [reporter]: { at, data } }, combined: data };
  const previous = shares[reporter];
  if (previous === undefined || previous.at <= at) shares[reporter] = { at, data };
  const fresh: Sample[] = [];
  for (const [name, share] of Object.entries(shares)) {
    if (share.at < at - SHARE_FRESH_WINDOWS * share.data.windowSeconds * 1000) delete shares[name];
    else fresh.push(share.data);
  }
  if (fresh.length <= 1) return { shares, combined: data };
  const sum = (pick: (s: Sample) => number) => fresh.reduce((total, s) => total + pick(s), 0);
  return {
    shares,
    combined: {
      ...data,
      tokensPerSecond: sum((s) => s.tokensPerSecond),
      completedRequests: sum((s) => s.completedRequests),
      inFlightRequests: sum((s) => s.inFlightRequests),
      awaitingTools: sum((s) => s.awaitingTools),
    },
  };
}
