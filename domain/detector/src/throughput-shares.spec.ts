import type { DataOf } from '@robustrl/contracts';
import { combineShares } from './throughput-shares';

const sample = (tokensPerSecond: number, inFlight: number, awaitingTools = 0): DataOf<'RolloutThroughputSampled'> => ({
  machineId: 'rollout-0',
  rolloutId: 'rollout-0',
  sampledAt: '2026-01-01T00:00:00.000Z',
  windowSeconds: 10,
  tokensPerSecond,
  completedRequests: tokensPerSecond > 0 ? 2 : 0,
  inFlightRequests: inFlight,
  awaitingTools,
});

describe('combineShares: a rollout sampled by several routers', () => {
  it('one router: its sample is the whole, as it is', () => {
    const s = sample(900, 8);
    const first = combineShares(undefined, 'router', 0, s);
    expect(first.combined).toBe(s);
    const again = sample(800, 6);
    expect(combineShares(first.shares, 'router', 10_000, again).combined).toBe(again);
  });

  it("two replicas: the rollout's throughput is the sum of their latest shares", () => {
    const { shares } = combineShares(undefined, 'router/r0', 0, sample(600, 5, 1));
    const { combined } = combineShares(shares, 'router/r1', 3_000, sample(300, 3));
    expect(combined).toMatchObject({ tokensPerSecond: 900, completedRequests: 4, inFlightRequests: 8, awaitingTools: 1 });
  });

  it('a router that stopped reporting (a replica gone) counts for two of its windows, then not', () => {
    const { shares } = combineShares(undefined, 'router/r0', 0, sample(600, 5));
    expect(combineShares(shares, 'router/r1', 20_000, sample(300, 3)).combined.tokensPerSecond).toBe(900);
    expect(combineShares(shares, 'router/r1', 20_001, sample(300, 3)).combined.tokensPerSecond).toBe(300);
    expect(Object.keys(shares)).toEqual(['router/r1']);
  });

  it("a router's older sample, read again after a restart, does not replace its newer one", () => {
    const { shares } = combineShares(undefined, 'router/r0', 10_000, sample(600, 5));
    combineShares(shares, 'router/r0', 0, sample(5, 5));
    expect(combineShares(shares, 'router/r1', 12_000, sample(300, 3)).combined.tokensPerSecond).toBe(900);
  });
});
