import { DEFAULT_CONSUMER_RESTART, restartDelayMs } from './restart-backoff';

describe('consumer restart backoff', () => {
  it('waits a second after the first crash, doubles with every crash in a row, and stops growing at half a minute', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 50].map((n) => restartDelayMs(n, DEFAULT_CONSUMER_RESTART))).toEqual([
      1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000,
    ]);
  });

  it('follows the policy it is given', () => {
    const policy = { initialDelayMs: 50, maxDelayMs: 300, stableAfterMs: 1_000 };
    expect([0, 1, 2, 3, 4, 5].map((n) => restartDelayMs(n, policy))).toEqual([50, 50, 100, 200, 300, 300]);
  });
});
