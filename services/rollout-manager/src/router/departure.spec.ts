import { departureLeaveAt } from './departure';

describe('departureLeaveAt', () => {
  const now = 1_000_000;

  it('lets go a fifth of the time left before the machine goes, at least 2 s and at most 20 s before', () => {
    expect(departureLeaveAt(now + 30_000, now)).toBe(now + 24_000);
    expect(departureLeaveAt(now + 120_000, now)).toBe(now + 100_000);
    expect(departureLeaveAt(now + 600_000, now)).toBe(now + 580_000);
    expect(departureLeaveAt(now + 5_000, now)).toBe(now + 3_000);
  });

  it('lets go before the agent stops its role (a tenth of the grace, at most 10 s, before the deadline)', () => {
    for (const graceMs of [3_000, 10_000, 30_000, 90_000, 120_000, 300_000]) {
      const agentStops = now + graceMs - Math.min(10_000, graceMs / 10);
      expect(departureLeaveAt(now + graceMs, now)).toBeLessThan(agentStops);
    }
  });

  it('says at once (at or before now) for a notice too short to drain on, or one already past', () => {
    expect(departureLeaveAt(now + 1_500, now)).toBeLessThanOrEqual(now);
    expect(departureLeaveAt(now - 5_000, now)).toBeLessThanOrEqual(now);
  });
});
