import { EnginePool, EngineView, selectEngine } from './engine-pool';

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

describe('selectEngine', () => {
  it('keeps a trajectory on its sticky engine while it is alive, however loaded', () => {
    const engines = [engine('a', { inFlight: 9 }), engine('b')];
    expect(selectEngine(engines, { stickyId: 'a' })?.id).toBe('a');
  });

  it('moves a trajectory whose sticky engine is dead or excluded to the least loaded living one', () => {
    const engines = [engine('a', { alive: false }), engine('b', { inFlight: 2 }), engine('c', { inFlight: 1 })];
    expect(selectEngine(engines, { stickyId: 'a' })?.id).toBe('c');
    expect(selectEngine(engines, { stickyId: 'c', exclude: new Set(['c']) })?.id).toBe('b');
  });

  it('breaks load ties by fewer sticky trajectories, then by id', () => {
    expect(selectEngine([engine('b', { stickyCount: 1 }), engine('c'), engine('a', { stickyCount: 2 })])?.id).toBe('c');
    expect(selectEngine([engine('b'), engine('a')])?.id).toBe('a');
  });

  it('finds nothing when no engine is alive', () => {
    expect(selectEngine([engine('a', { alive: false })])).toBeUndefined();
    expect(selectEngine([])).toBeUndefined();
  });
});

describe('EnginePool', () => {
  const up = new Set<string>();
  const pool = () =>
    new EnginePool(
      [
        { id: 'a', baseUrl: 'http://a/' },
        { id: 'b', baseUrl: 'http://b', weightVersion: 3 },
      ],
      { probeIntervalMs: 0, probe: async (e) => up.has(e.id) },
    );

  beforeEach(() => {
    up.clear();
    up.add('a');
    up.add('b');
  });

  it('counts leases as load, releases once, and spreads requests of no trajectory', () => {
    const p = pool();
    const first = p.acquire(null)!;
    expect(first.engine.id).toBe('a');
    expect(p.acquire(null)!.engine.id).toBe('b');
    expect(p.get('a')?.inFlight).toBe(1);
    first.release();
    first.release();
    expect(p.get('a')?.inFlight).toBe(0);
    expect(p.get('a')?.baseUrl).toBe('http://a');
  });

  it('sticks a trajectory to its engine and moves it when the engine dies; a passing probe revives it', async () => {
    const p = pool();
    p.acquire('t1')!.release();
    expect(p.acquire('t1')!.engine.id).toBe('a');
    up.delete('a');
    p.markDead('a', 'connection refused');
    expect(p.get('a')).toMatchObject({ alive: false, deadReason: 'connection refused' });
    const moved = p.acquire('t1')!;
    expect(moved.engine.id).toBe('b');
    expect(p.stickyEngineOf('t1')).toBe('b');
    expect(p.get('b')?.stickyCount).toBe(1);
    expect(p.get('a')?.stickyCount).toBe(0);
    await p.probeAll();
    expect(p.get('a')?.alive).toBe(false);
    up.add('a');
    await p.probeDead();
    expect(p.get('a')?.alive).toBe(true);
    expect(p.acquire('t1')!.engine.id).toBe('b');
  });

  it('a transient failure on a healthy engine is undone by the probe that follows it', async () => {
    const p = pool();
    p.markDead('a', 'socket reset');
    expect(p.get('a')?.alive).toBe(false);
    await p.probe('a');
    expect(p.get('a')?.alive).toBe(true);
  });

  it('the periodic sweep takes a living engine out on its second failed probe in a row; a check, on one', async () => {
    const changes: string[] = [];
    const p = new EnginePool([{ id: 'a', baseUrl: 'http://a' }], {
      probeIntervalMs: 0,
      probe: async (e) => up.has(e.id),
      onChange: (e, change) => changes.push(`${e.id} ${change}`),
    });
    up.delete('a');
    await p.probeAll('periodic');
    expect(p.get('a')?.alive).toBe(true);
    up.add('a');
    await p.probeAll('periodic');
    up.delete('a');
    await p.probeAll('periodic');
    expect(p.get('a')?.alive).toBe(true);
    await p.probeAll('periodic');
    expect(p.get('a')).toMatchObject({ alive: false, deadReason: 'liveness probe failed' });
    up.add('a');
    await p.probeAll('periodic');
    up.delete('a');
    await p.probe('a');
    expect(p.get('a')?.alive).toBe(false);
    expect(changes).toEqual(['a dead', 'a alive', 'a dead']);
  });

  it('drains a leaving engine: no new request, its own kept until it holds none, its trajectories elsewhere from their next turn', () => {
    const p = pool();
    const held = p.acquire('t1')!;
    expect(held.engine.id).toBe(p.stickyEngineOf('t1'));
    const leaving = held.engine.id;
    const other = leaving === 'a' ? 'b' : 'a';
    p.drain(leaving, Date.now() + 60_000);
    expect(p.get(leaving)).toMatchObject({ leavesAt: expect.any(Number), inFlight: 1 });
    expect(held.left.aborted).toBe(false);
    // Its trajectory's next turn, and any new request, go to the other engine.
    expect(p.stickyEngineOf('t1')).toBeUndefined();
    const next = p.acquire('t1')!;
    expect(next.engine.id).toBe(other);
    expect(p.acquire(null)!.engine.id).toBe(other);
    // Added again while it drains (its machine registered anew): it routes again.
    p.add({ id: leaving, baseUrl: `http://${leaving}` });
    expect(p.get(leaving)?.leavesAt).toBeNull();
    p.drain(leaving, Date.now() + 60_000);
    held.release();
    expect(p.get(leaving)).toBeUndefined();
    expect(held.left.aborted).toBe(true);
  });

  it('drains until the deadline, then the requests still on the engine fail over; one holding nothing leaves at once', async () => {
    const p = pool();
    const held = p.acquire(null)!;
    p.drain(held.engine.id, Date.now() + 30);
    expect(p.get(held.engine.id)?.leavesAt).toEqual(expect.any(Number));
    await new Promise((r) => setTimeout(r, 60));
    expect(p.get(held.engine.id)).toBeUndefined();
    expect(held.left.aborted).toBe(true);
    const idle = p.snapshot()[0].id;
    p.drain(idle, Date.now() + 60_000);
    expect(p.get(idle)).toBeUndefined();
  });

  it('forgets the oldest sticky trajectories beyond its limit', () => {
    const p = new EnginePool([{ id: 'a', baseUrl: 'http://a' }], { probeIntervalMs: 0, maxStickyTrajectories: 2, probe: async () => true });
    for (const t of ['t1', 't2', 't3']) p.acquire(t)!.release();
    expect(p.stickyEngineOf('t1')).toBeUndefined();
    expect(p.stickyEngineOf('t3')).toBe('a');
    expect(p.get('a')?.stickyCount).toBe(2);
  });
});
