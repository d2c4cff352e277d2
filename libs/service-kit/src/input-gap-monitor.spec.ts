import { BusHealth } from '@robustrl/bus';
import { InputGapMonitor } from './input-gap-monitor';

const GROUP = 'robustrl-detector';
const T = Date.parse('2026-11-23T00:00:00Z');
const s = (seconds: number) => T + seconds * 1000;
const healthy = (lag: number | null = 0): BusHealth => ({ reachable: true, subscriptions: [{ groupId: GROUP, running: true, lag, restarts: 0 }] });
const sample = (health: BusHealth, newestInputAt: number | null = null) => ({ health, groupId: GROUP, newestInputAt });

describe('InputGapMonitor: when a consumer is blind to its input', () => {
  it('starts blind (its restart) from the newest input applied before, and sees the gap close once caught up', () => {
    const monitor = new InputGapMonitor(10_000, s(100), s(40));
    expect(monitor.current).toEqual(expect.objectContaining({ reason: 'consumer-restart', since: s(40) }));
    // Reading the backlog: records wait, the newest input read is from 50.
    expect(monitor.observe(sample(healthy(5_000), s(50)), s(101))).toBeNull();
    expect(monitor.current?.reason).toBe('consumer-restart');
    expect(monitor.observe(sample(healthy(0), s(101)), s(102))).toEqual({
      kind: 'closed',
      gap: expect.objectContaining({ reason: 'consumer-restart', since: s(40) }),
      at: s(102),
    });
    expect(monitor.current).toBeNull();
  });

  it('opens a gap from the last healthy sample when the broker stops answering, and closes it when it answers caught up', () => {
    const monitor = new InputGapMonitor(10_000, s(0));
    monitor.observe(sample(healthy()), s(1));
    expect(monitor.observe(sample(healthy(3), s(4)), s(5))).toBeNull(); // records wait, but the input read is fresh
    const opened = monitor.observe(sample({ reachable: false, error: 'connect ECONNREFUSED', subscriptions: [] }), s(6));
    expect(opened).toEqual({ kind: 'opened', gap: { reason: 'broker-unreachable', since: s(5), detail: 'connect ECONNREFUSED' } });
    expect(monitor.observe(sample({ reachable: false, subscriptions: [] }), s(50))).toBeNull();
    // Back, but reading what was produced during the outage: still blind.
    expect(monitor.observe(sample(healthy(90_000), s(8)), s(96))).toBeNull();
    expect(monitor.observe(sample(healthy(12), s(95)), s(97))).toEqual({ kind: 'closed', gap: expect.objectContaining({ since: s(5) }), at: s(97) });
  });

  it('a stopped or missing consumer is blind; a lagging one only once the newest input read is older than the tolerance', () => {
    const monitor = new InputGapMonitor(10_000, s(0));
    monitor.observe(sample(healthy()), s(1));
    const stopped: BusHealth = { reachable: true, subscriptions: [{ groupId: GROUP, running: false, lag: 7, restarts: 1, error: 'KafkaJSNonRetriableError' }] };
    expect(monitor.observe(sample(stopped), s(2))).toEqual({
      kind: 'opened',
      gap: expect.objectContaining({ reason: 'consumer-stopped', detail: 'KafkaJSNonRetriableError' }),
    });
    monitor.observe(sample(healthy()), s(3));
    expect(monitor.observe(sample({ reachable: true, subscriptions: [] }), s(4))?.kind).toBe('opened');
    monitor.observe(sample(healthy()), s(5));

    expect(monitor.observe(sample(healthy(40), s(-4)), s(6))).toBeNull(); // 10 s old: within the tolerance
    expect(monitor.observe(sample(healthy(40), s(-5)), s(6))).toEqual({
      kind: 'opened',
      gap: { reason: 'consumer-lag', since: s(6), detail: '40 record(s) waiting; the newest input read is 11 s old' },
    });
  });

  it('an unknown lag (the lag query failed) neither opens nor closes a gap', () => {
    const monitor = new InputGapMonitor(10_000, s(0));
    expect(monitor.observe(sample(healthy(null)), s(1))).toBeNull();
    expect(monitor.current?.reason).toBe('consumer-restart');
    monitor.observe(sample(healthy(0)), s(2));
    expect(monitor.observe(sample(healthy(null)), s(3))).toBeNull();
    expect(monitor.current).toBeNull();
  });
});
