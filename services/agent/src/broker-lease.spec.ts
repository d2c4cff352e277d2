import { BrokerLease, RoleLeaseGuard } from './broker-lease';

describe('the trainer role held on a broker lease', () => {
  it('runs out once, after the lease without a record taken, and is regained once by the next record', () => {
    const lease = new BrokerLease(10_000, 0);
    expect(lease.runsOut(9_999)).toBe(false);
    expect(lease.renew(5_000)).toBe('renewed');
    expect(lease.runsOut(14_999)).toBe(false);
    expect(lease.runsOut(15_000)).toBe(true);
    expect(lease.runsOut(20_000)).toBe(false); // once
    expect(lease.expired).toBe(true);
    expect(lease.silenceMs(20_000)).toBe(15_000);
    expect(lease.renew(21_000)).toBe('regained');
    expect(lease.renew(22_000)).toBe('renewed');
    expect(lease.expired).toBe(false);
  });

  it('a lease of 0 never runs out', () => {
    expect(new BrokerLease(0, 0).runsOut(1e12)).toBe(false);
  });

  it('the guard stops a held role when the lease runs out, and reports it when the broker takes records again', async () => {
    const log: string[] = [];
    let held = true;
    const role = {
      held: () => held,
      stop: async () => {
        log.push('stopped');
        held = false;
      },
      report: async (detail: string) => {
        log.push(`reported: ${detail}`);
      },
      logger: { log: () => undefined, warn: (line: string) => log.push(`warn: ${line}`), error: () => undefined },
    };
    const guard = new RoleLeaseGuard(new BrokerLease(10_000, 0), role);
    await guard.check(9_000);
    expect(log).toEqual([]);
    await guard.check(12_000);
    expect(log).toEqual([
      'warn: lease expired: the broker took nothing from this agent for 12 s (lease 10 s); stopping the role process so that it cannot train beside a replacement',
      'stopped',
    ]);
    guard.renewed(30_000);
    await new Promise((r) => setImmediate(r));
    expect(log.at(-1)).toBe('reported: the role process was stopped after 10 s without broker contact');
    guard.renewed(31_000);
    await new Promise((r) => setImmediate(r));
    expect(log.filter((l) => l.startsWith('reported'))).toHaveLength(1);
  });

  it('a role the lease does not hold (a rollout, or no process running) is never stopped', async () => {
    const stop = jest.fn(async () => undefined);
    const guard = new RoleLeaseGuard(new BrokerLease(10_000, 0), {
      held: () => false,
      stop,
      report: async () => undefined,
      logger: { log: () => undefined, warn: () => undefined, error: () => undefined },
    });
    await guard.check(60_000);
    expect(stop).not.toHaveBeenCalled();
  });
});
