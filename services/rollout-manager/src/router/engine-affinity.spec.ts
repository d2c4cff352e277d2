import { EnginePool, EngineView, loadBound, rendezvousScore, selectEngine } from './engine-pool';

const engine = (id: string, over: Partial<EngineView> = {}): EngineView => ({
  id,
  machineId: id,
  baseUrl: `http://${id}`,
  kind: 'vllm',
  weightVersion: 0,
  inFlight: 0,
  alive: true,
  leavesAt: null,
  stickyCount: 0,
  deadReason: null,
  ...over,
});

const ids = ['e0', 'e1', 'e2', 'e3'];
const pools = () =>
  [0, 1].map(
    () =>
      new EnginePool(
        ids.map((id) => ({ id, baseUrl: `http://${id}` })),
        { probeIntervalMs: 0, probe: async () => true },
      ),
  );
/** The engine rendezvous hashing gives a trajectory among `among`. */
const ownerOf = (key: string, among: readonly string[]) => [...among].sort((a, b) => rendezvousScore(key, b) - rendezvousScore(key, a))[0];

describe('routing for the cache: consistent hashing with bounded loads', () => {
  it('two router replicas place every trajectory on the same engine, with no state shared', () => {
    const [a, b] = pools();
    for (let i = 0; i < 200; i++) {
      const t = `job/p${i}/0`;
      const onA = a.acquire(t)!;
      const onB = b.acquire(t)!;
      expect(onB.engine.id).toBe(onA.engine.id);
      onA.release();
      onB.release();
    }
  });

  it('spreads trajectories over the engines, and a loaded engine is passed over: none carries more than the bound', () => {
    const [p] = pools();
    const counts = new Map<string, number>();
    for (let i = 0; i < 400; i++) {
      const lease = p.acquire(`job/q${i}/0`)!;
      counts.set(lease.engine.id, (counts.get(lease.engine.id) ?? 0) + 1);
      const load = ids.map((id) => p.get(id)!.inFlight);
      const total = load.reduce((x, y) => x + y, 0);
      expect(Math.max(...load)).toBeLessThanOrEqual(loadBound(total - 1, ids.length));
    }
    for (const id of ids) expect(counts.get(id)).toBeGreaterThan(60);
  });

  it('with room everywhere, a trajectory goes to its own engine: its hash, not the least loaded', () => {
    const key = 'job/r1/0';
    const owner = ownerOf(key, ids);
    const engines = ids.map((id) => engine(id, { inFlight: id === owner ? 3 : 2 }));
    expect(selectEngine(engines, { key })?.id).toBe(owner);
    // Far above the rest, it is passed over for the next engine by hash.
    const loaded = ids.map((id) => engine(id, { inFlight: id === owner ? 40 : 2 }));
    expect(selectEngine(loaded, { key })?.id).toBe(
      ownerOf(
        key,
        ids.filter((id) => id !== owner),
      ),
    );
  });

  it('failover moves a trajectory to its next engine by hash, once, and it stays there when the first comes back', () => {
    const [p] = pools();
    const t = 'job/f1/0';
    const first = ownerOf(t, ids);
    p.acquire(t)!.release();
    expect(p.stickyEngineOf(t)).toBe(first);
    p.markDead(first, 'connection refused');
    const moved = p.acquire(t)!;
    moved.release();
    expect(moved.engine.id).toBe(
      ownerOf(
        t,
        ids.filter((id) => id !== first),
      ),
    );
    p.add({ id: first, baseUrl: `http://${first}` });
    void p.probe(first);
    expect(p.acquire(t)!.engine.id).toBe(moved.engine.id);
  });

  it('a request of no trajectory still goes to the least loaded engine', () => {
    const engines = [engine('a', { inFlight: 2 }), engine('b', { inFlight: 1 })];
    expect(selectEngine(engines, { key: null })?.id).toBe('b');
  });
});
