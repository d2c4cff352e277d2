import { InProcessBus } from '@robustrl/bus';
import { eventually } from '@robustrl/testing/eventually';
import { EngineAnnouncer, EngineFollower } from './engine-announcements';
import { EnginePool } from './engine-pool';
import { RouterLogger } from './router-reporting';

const quiet: RouterLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };
const pool = (specs: Array<{ id: string; baseUrl: string; weightVersion?: number }> = []) =>
  new EnginePool(specs, { probeIntervalMs: 0, probe: async () => true });

describe('router replicas follow the engines the rollout manager announces', () => {
  let bus: InProcessBus;
  beforeEach(() => (bus = new InProcessBus()));
  afterEach(() => bus.close());

  it('a replica adopts the announced engines: joins, version changes and departures; its own listed engine stays', async () => {
    const now = 0;
    const primary = pool([{ id: 'e0', baseUrl: 'http://e0' }]);
    const announcer = new EngineAnnouncer(bus, 'job-a', primary, quiet, { now: () => now });
    const replica = pool([{ id: 'own', baseUrl: 'http://own' }]);
    const follower = new EngineFollower(bus, 'job-a', replica, [{ id: 'own', baseUrl: 'http://own' }], quiet, 'robustrl-rollout-manager-router-r1');
    // Another job's announcement is not this replica's.
    const other = new EngineAnnouncer(bus, 'job-b', pool([{ id: 'x', baseUrl: 'http://x' }]), quiet);
    await follower.start();
    await other.tick();
    await announcer.tick();
    await eventually('e0 adopted', () => (replica.get('e0') ? true : undefined));
    expect(replica.get('x')).toBeUndefined();

    primary.add({ id: 'e1', baseUrl: 'http://e1', weightVersion: 3 });
    primary.setWeightVersion('e0', 2);
    await announcer.tick();
    await eventually('e1 adopted', () => (replica.get('e1') ? true : undefined));
    expect(replica.get('e1')).toMatchObject({ baseUrl: 'http://e1', weightVersion: 3 });
    expect(replica.get('e0')?.weightVersion).toBe(2);

    primary.remove('e0');
    await announcer.tick();
    await eventually('e0 gone', () => (replica.get('e0') ? undefined : true));
    expect(
      replica
        .snapshot()
        .map((e) => e.id)
        .sort(),
    ).toEqual(['e1', 'own']);
    await follower.stop();
  });

  it('a leaving engine drains on the replica too: no new request there, kept for the ones it holds, never added anew', async () => {
    const primary = pool([
      { id: 'e0', baseUrl: 'http://e0' },
      { id: 'e1', baseUrl: 'http://e1' },
    ]);
    const announcer = new EngineAnnouncer(bus, 'job-a', primary, quiet);
    const replica = pool();
    const follower = new EngineFollower(bus, 'job-a', replica, [], quiet, 'robustrl-rollout-manager-router-r2');
    await follower.start();
    await announcer.tick();
    await eventually('both adopted', () => (replica.snapshot().length === 2 ? true : undefined));
    const onReplica = replica.acquire(null)!;
    const leaving = onReplica.engine.id;
    const staying = leaving === 'e0' ? 'e1' : 'e0';
    // The primary drains it (it holds a request there too).
    primary.acquire(null, new Set([staying]));
    primary.drain(leaving, Date.now() + 60_000);
    await announcer.tick();
    await eventually('drained on the replica', () => (replica.get(leaving)?.leavesAt !== null ? true : undefined));
    expect(replica.get(leaving)?.leavesAt).toBe(primary.get(leaving)?.leavesAt);
    expect(replica.acquire(null)!.engine.id).toBe(staying);
    // Announced again while it drains: it stays draining; once the replica's request ends it leaves, and is not added back.
    await announcer.tick();
    onReplica.release();
    expect(replica.get(leaving)).toBeUndefined();
    follower.adopt([
      {
        engineId: leaving,
        machineId: leaving,
        url: `http://${leaving}`,
        kind: 'vllm',
        weightVersion: 0,
        leavesAt: new Date(Date.now() + 60_000).toISOString(),
      },
    ]);
    expect(replica.get(leaving)).toBeUndefined();
    await follower.stop();
  });

  it('announces on a change at once, and otherwise again once a period passed, so a late replica catches up', async () => {
    let now = 1_000;
    const published: string[] = [];
    const recording = { publish: async (m: { type: string }) => void published.push(m.type) } as unknown as InProcessBus;
    const primary = pool([{ id: 'e0', baseUrl: 'http://e0' }]);
    const announcer = new EngineAnnouncer(recording, 'job-a', primary, quiet, { now: () => now, periodMs: 5_000 });
    await announcer.tick();
    now += 1_000;
    await announcer.tick();
    expect(published).toHaveLength(1);
    primary.setWeightVersion('e0', 1);
    await announcer.tick();
    expect(published).toHaveLength(2);
    now += 5_000;
    await announcer.tick();
    expect(published).toEqual(['RouterEnginesAnnounced', 'RouterEnginesAnnounced', 'RouterEnginesAnnounced']);
  });
});
