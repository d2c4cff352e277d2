import type { EngineView } from './engine-pool';
import { ThroughputMeter } from './throughput-meter';

const engine = (id: string, inFlight = 0): EngineView => ({
  id,
  machineId: `m-${id}`,
  baseUrl: 'http://x',
  kind: 'vllm',
  weightVersion: 1,
  inFlight,
  alive: true,
  leavesAt: null,
  stickyCount: 0,
  deadReason: null,
});

describe('throughput meter', () => {
  it('reports tokens per second, completions, and trajectories parked on tools per engine, then starts a new window', () => {
    const meter = new ThroughputMeter(0);
    meter.answered('e1', 300);
    meter.answered('e1', 100);
    meter.awaitingTools('t1', 'e1');
    meter.awaitingTools('t2', 'e2');
    meter.awaitingTools('t2', null); // t2's tool result came back
    expect(meter.take(10_000, [engine('e1', 2), engine('e2')])).toEqual([
      { engineId: 'e1', machineId: 'm-e1', windowSeconds: 10, tokensPerSecond: 40, completedRequests: 2, inFlightRequests: 3, awaitingTools: 1 },
      { engineId: 'e2', machineId: 'm-e2', windowSeconds: 10, tokensPerSecond: 0, completedRequests: 0, inFlightRequests: 0, awaitingTools: 0 },
    ]);
    // Counters restart; a parked trajectory stays parked until it comes back.
    expect(meter.take(20_000, [engine('e1')])[0]).toMatchObject({ tokensPerSecond: 0, completedRequests: 0, awaitingTools: 1 });
  });
});
