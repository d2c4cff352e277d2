import type { MessageBus } from '@robustrl/bus';
import type { MessageOf, RobustrlMessage } from '@robustrl/contracts';
import { Departure, DepartureSource, OrchestratorError } from '@robustrl/orchestrator';
import { DepartureRelay } from './departure-relay';

const NOW = Date.parse('2026-11-29T12:00:00Z');

const eviction: Departure = {
  jobId: 'job-1',
  machineId: 'job-1-trainer-0',
  role: 'trainer',
  reason: 'DisruptionTarget EvictionByEvictionAPI',
  departsAt: NOW + 30_000,
  key: 'uid-1:DisruptionTarget:EvictionByEvictionAPI',
};
const mark: Departure = {
  jobId: 'job-1',
  machineId: 'job-1-rollout-a',
  role: 'rollout',
  reason: 'taint ToBeDeletedByClusterAutoscaler:NoSchedule',
  departsAt: null,
  key: 'uid-2:taint',
};

function setUp(reads: Array<Departure[] | Error>) {
  const published: RobustrlMessage[] = [];
  let failPublish = 0;
  const bus = {
    publish: async (m: RobustrlMessage | readonly RobustrlMessage[]) => {
      if (failPublish > 0) {
        failPublish -= 1;
        throw new Error('broker unavailable');
      }
      published.push(...(Array.isArray(m) ? m : [m as RobustrlMessage]));
    },
  } as unknown as MessageBus;
  let n = 0;
  const source: DepartureSource = {
    departures: async () => {
      const r = reads[Math.min(n++, reads.length - 1)]!;
      if (r instanceof Error) throw r;
      return r;
    },
  };
  const warnings: string[] = [];
  const relay = new DepartureRelay(bus, source, {
    intervalMs: 60_000,
    clock: () => NOW,
    logger: { log: () => undefined, warn: (w: string) => warnings.push(w) },
  });
  return { relay, published, warnings, failPublishOnce: () => (failPublish = 1) };
}

const signals = (ms: RobustrlMessage[]) => ms as Array<MessageOf<'AgentFaultSignalled'>>;

describe('DepartureRelay (the platform’s notices as evidence)', () => {
  it("sends each announcement once, as an agent's notice: node-draining with the time left", async () => {
    const { relay, published } = setUp([[eviction], [eviction, mark], [eviction, mark]]);
    await relay.poll();
    await relay.poll();
    await relay.poll();
    const [first, second, ...rest] = signals(published);
    expect(rest).toEqual([]);
    expect(first).toMatchObject({
      type: 'AgentFaultSignalled',
      jobId: 'job-1',
      source: 'controller/departures',
      data: { machineId: 'job-1-trainer-0', role: 'trainer', signal: 'node-draining', exitCode: null, departsInMs: 30_000 },
    });
    expect(first!.data.detail).toContain('DisruptionTarget EvictionByEvictionAPI');
    // No deadline given: none sent.
    expect(second!.data.machineId).toBe('job-1-rollout-a');
    expect(second!.data).not.toHaveProperty('departsInMs');
  });

  it('derives the record’s id from the announcement, so a restarted controller sends the same record', async () => {
    const a = setUp([[eviction]]);
    const b = setUp([[eviction]]);
    await a.relay.poll();
    await b.relay.poll();
    expect(a.published[0]!.eventId).toBe(b.published[0]!.eventId);
    const c = setUp([[{ ...eviction, key: 'uid-1:deleted' }]]);
    await c.relay.poll();
    expect(c.published[0]!.eventId).not.toBe(a.published[0]!.eventId);
  });

  it('a deadline already passed is sent as no time left', async () => {
    const { relay, published } = setUp([[{ ...eviction, departsAt: NOW - 5_000 }]]);
    await relay.poll();
    expect(signals(published)[0]!.data.departsInMs).toBe(0);
  });

  it('a platform that cannot be read is said once and read again; nothing is lost', async () => {
    const down = new OrchestratorError('kubernetes: list pods failed with HTTP 503', true);
    const { relay, published, warnings } = setUp([down, down, [eviction]]);
    expect(await relay.poll()).toEqual([]);
    expect(await relay.poll()).toEqual([]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('HTTP 503');
    expect(await relay.poll()).toEqual([eviction]);
    expect(published).toHaveLength(1);
  });

  it('an announcement the bus refused is sent again at the next read', async () => {
    const { relay, published, failPublishOnce } = setUp([[eviction]]);
    failPublishOnce();
    expect(await relay.poll()).toEqual([]);
    expect(await relay.poll()).toEqual([eviction]);
    expect(published).toHaveLength(1);
  });
});
