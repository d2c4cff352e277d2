import { untilAvailable } from './wait-for-dependency';

const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

describe('untilAvailable: a dependency down at start is waited for, a wrong setting is not', () => {
  const warnings: string[] = [];
  const logger = { info: () => undefined, warn: (m: string) => void warnings.push(m), error: () => undefined };
  const slept: number[] = [];
  const sleep = async (ms: number) => void slept.push(ms);
  beforeEach(() => {
    warnings.length = 0;
    slept.length = 0;
  });

  it('retries while the failure is the infrastructure’s, backing off 1 s doubling to 30 s, and returns what finally worked', async () => {
    let calls = 0;
    const value = await untilAvailable(
      'the store',
      async () => {
        calls += 1;
        if (calls <= 7) throw refused();
        return 'open';
      },
      { logger, sleep },
    );
    expect(value).toBe('open');
    expect(slept).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    expect(warnings[0]).toMatch(/^waiting for the store \(attempt 1 failed, next in 1 s\): connect ECONNREFUSED/);
  });

  it('rethrows at once what is not the infrastructure’s (a bad setting, a bug)', async () => {
    await expect(untilAvailable('the store', async () => Promise.reject(new Error('password authentication failed')), { logger, sleep })).rejects.toThrow(
      'password authentication failed',
    );
    expect(slept).toEqual([]);
  });

  it('stops waiting once cancelled (the bus is closing) and rethrows the last failure', async () => {
    let closing = false;
    const attempt = async () => {
      closing = true;
      throw refused();
    };
    await expect(untilAvailable('the broker', attempt, { logger, sleep, cancelled: () => closing })).rejects.toThrow('ECONNREFUSED');
  });
});
