import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { nextEngineWeightAction } from './engine-weight-action';
import { EngineWeightSync, HeldVersion } from './engine-weight-sync';
import { activityInMetrics, VllmEngineClient } from './vllm-engine-client';
import { FakeVllm } from '@robustrl/testing/fake-vllm-routes';

describe('nextEngineWeightAction: keeping the engine on the newest version held whole', () => {
  it.each([
    [null, null, { kind: 'wait' }],
    [null, 4, { kind: 'wait' }],
    ['default', null, { kind: 'stamp-base' }],
    // Stamped before anything is loaded: its tokens until the load are the starting model's (version 0).
    ['default', 4, { kind: 'stamp-base' }],
    ['3', 4, { kind: 'load', version: 4 }],
    ['4', 4, { kind: 'wait' }],
    // A newer version than held (loaded by someone else): nothing to undo.
    ['5', 4, { kind: 'wait' }],
    ['0', null, { kind: 'wait' }],
  ] as const)('engine %p, held %p → %p', (engine, held, action) => {
    expect(nextEngineWeightAction(engine, held)).toEqual(action);
  });
});

describe('EngineWeightSync against vLLM-shaped routes', () => {
  let vllm: FakeVllm;
  let sync: EngineWeightSync;
  let held: HeldVersion | null;
  let phases: string[];
  const version = (v: number): HeldVersion => ({
    version: v,
    parts: [
      { path: `/dev/shm/v${v}-s0`, target: null, bucketStarts: [0, 512], tensors: [{ name: 'a' }] },
      { path: `/dev/shm/v${v}-s1`, target: null, bucketStarts: [0], tensors: [{ name: 'b' }] },
    ],
  });

  beforeEach(async () => {
    vllm = new FakeVllm();
    const url = await vllm.start();
    held = null;
    phases = [];
    sync = new EngineWeightSync(
      new VllmEngineClient(url),
      () => held,
      'rollout-0',
      10_000,
      (phase, v) => phases.push(`${phase}@${v}`),
    );
  });
  afterEach(() => new Promise<void>((r) => vllm.server.close(() => r())));
  /** The sync with its idle threshold and a clock of the test's. */
  const withClock = (idleAfterMs: number, now: () => number) =>
    new EngineWeightSync(
      new VllmEngineClient(vllm.url),
      () => held,
      'rollout-0',
      10_000,
      (phase, v) => phases.push(`${phase}@${v}`),
      { idleAfterMs, now },
    );

  it('stamps a fresh engine as version 0, then loads a whole version in the documented order', async () => {
    await sync.tick();
    expect(vllm.calls).toEqual(['/update_weight_version']);
    expect(vllm.version).toBe('0');
    held = version(3);
    vllm.calls = [];
    await sync.tick();
    expect(vllm.calls).toEqual(['/pause?mode=keep', '/collective_rpc', '/update_weight_version', '/reset_prefix_cache?reset_running_requests=true', '/resume']);
    expect(vllm.bodies[0]).toMatchObject({
      method: 'robustrl_load_weights',
      kwargs: {
        version: 3,
        parts: [
          { path: '/dev/shm/v3-s0', bucketStarts: [0, 512], tensors: [{ name: 'a' }] },
          { path: '/dev/shm/v3-s1', bucketStarts: [0], tensors: [{ name: 'b' }] },
        ],
      },
    });
    expect(vllm.version).toBe('3');
    expect(sync.lastLoad?.version).toBe(3);
    vllm.calls = [];
    await sync.tick();
    expect(vllm.calls).toEqual([]);
    // The engine reports no phase of its own: the agent reports it for the engine.
    expect(phases).toEqual(['rollout@0', 'weight-update@3', 'rollout@3', 'rollout@3']);
  });

  it('a failed load resumes the engine without stamping the version, and is tried again later', async () => {
    held = version(5);
    vllm.version = '4';
    vllm.failLoads = 1;
    await sync.tick();
    expect(vllm.calls).toEqual(['/pause?mode=keep', '/collective_rpc', '/resume']);
    expect(vllm.version).toBe('4');
    // Backing off: the next tick does nothing, the one after loads.
    vllm.calls = [];
    await sync.tick();
    expect(vllm.calls).toEqual([]);
    await sync.tick();
    expect(vllm.version).toBe('5');
  });

  it('an engine that restarted (serving its starting model again) gets the held version loaded again', async () => {
    held = version(7);
    await sync.tick();
    expect(vllm.version).toBe('7');
    vllm.version = 'default';
    vllm.calls = [];
    await sync.tick();
    expect(vllm.version).toBe('7');
    // Stamped as the model it started from before the load, in the same look.
    expect(vllm.calls.slice(0, 2)).toEqual(['/update_weight_version', '/pause?mode=keep']);
    expect(phases.slice(-3)).toEqual(['rollout@0', 'weight-update@7', 'rollout@7']);
  });

  it('reports the engine idle once it has run no request for idleAfterMs, and serving again at its next request', async () => {
    let now = 0;
    sync = withClock(3_000, () => now);
    vllm.version = '2';
    vllm.running = 0;
    await sync.tick(); // first seen: serving until it proves idle
    now = 2_000;
    await sync.tick();
    now = 3_000;
    await sync.tick();
    vllm.running = 4;
    now = 3_500;
    await sync.tick();
    vllm.running = 0;
    now = 6_000;
    await sync.tick(); // a gap between two requests is not idleness
    now = 6_500;
    await sync.tick();
    expect(phases).toEqual(['rollout@2', 'rollout@2', 'idle@2', 'rollout@2', 'rollout@2', 'idle@2']);
  });

  it('counts requests finished between two looks as work: short answers the gauges never catch keep it serving', async () => {
    let now = 0;
    sync = withClock(3_000, () => now);
    vllm.version = '2';
    vllm.running = 0;
    vllm.finished = 10;
    await sync.tick();
    for (const t of [1_000, 2_000, 3_000, 4_000]) {
      now = t;
      vllm.finished += 5; // five answers of a few dozen ms each since the last look, none running at it
      await sync.tick();
    }
    now = 7_500; // then nothing for 3.5 s
    await sync.tick();
    expect(phases).toEqual(['rollout@2', 'rollout@2', 'rollout@2', 'rollout@2', 'rollout@2', 'idle@2']);
  });

  it('an engine that exports no request metrics stays serving', async () => {
    let now = 0;
    sync = withClock(1, () => now);
    vllm.version = '1';
    await sync.tick();
    now = 60_000;
    await sync.tick();
    expect(phases).toEqual(['rollout@1', 'rollout@1']);
  });

  it('reads the running and waiting requests and the finished ones from a Prometheus exposition', () => {
    const text = [
      '# HELP vllm:num_requests_running Number of requests in model execution batches.',
      'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
      'vllm:num_requests_running{engine="1",model_name="m"} 1.0',
      'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0',
      'vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} 9.0',
      'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 40.0',
      'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 2.0',
      'vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} 1.79e+09',
    ].join('\n');
    expect(activityInMetrics(text)).toEqual({ inFlight: 6, finished: 42 });
    expect(activityInMetrics('vllm:num_requests_running{engine="0"} 0.0\n')).toEqual({ inFlight: 0, finished: null });
    expect(activityInMetrics('process_cpu_seconds_total 1.0\n')).toBeNull();
  });

  it('waits while the engine does not answer', async () => {
    await new Promise<void>((r) => vllm.server.close(() => r()));
    held = version(1);
    await sync.tick();
    expect(sync.lastLoad).toBeNull();
    vllm.server = createServer();
  });
});

describe('EngineWeightSync: an engine wedged in its weight load', () => {
  /** Answers everything as vLLM does, but never answers a load (alive, its health check fine). */
  let server: Server;
  let url: string;
  let loads = 0;
  beforeEach(async () => {
    loads = 0;
    server = createServer((req, res) => {
      if (req.url === '/weight_info') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ weight_version: '3' }));
      if (req.url === '/collective_rpc')
        loads += 1; // …and never answered
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });

  it('is reported once past the deadline, not again on later tries, and again once the engine restarted', async () => {
    const stalls: string[] = [];
    const ages: number[] = [];
    const phases: string[] = [];
    const held: HeldVersion = { version: 4, parts: [{ path: '/dev/shm/v4', target: null, bucketStarts: [0], tensors: [] }] };
    const sync = new EngineWeightSync(
      new VllmEngineClient(url, 60_000),
      () => held,
      'rollout-0',
      10_000,
      (phase, v) => phases.push(`${phase}@${v}`),
      undefined,
      { deadlineMs: 200, onStalled: (detail, how, forMs) => (stalls.push(`${how}: ${detail}`), ages.push(forMs)) },
    );
    const started = Date.now();
    await sync.tick();
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(stalls).toEqual(['load: the engine did not finish loading version 4 within 0.2 s: wedged in its weight load']);
    expect(phases).toEqual(['weight-update@4']);
    // The fault is dated from the load's start: the age is the deadline (and a look's overrun), not zero.
    expect(ages[0]).toBeGreaterThanOrEqual(190);
    expect(ages[0]).toBeLessThan(5_000);
    // Backed off one tick, then tried again: still wedged, not reported twice.
    await sync.tick();
    await sync.tick();
    expect(loads).toBe(2);
    expect(stalls).toHaveLength(1);
    sync.engineRestarted();
    await sync.tick();
    expect(stalls).toHaveLength(2);
    expect(sync.lastLoad).toBeNull();
  });

  it('an engine that answered and then answers nothing for the deadline (stopped outside a load) is unresponsive; a starting one is not', async () => {
    const stalls: string[] = [];
    let stopped = false;
    // A stopped process: its port accepts the connection, nothing answers.
    const engine = createServer((_req, res) => {
      if (stopped) return;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ weight_version: '3' }));
    });
    await new Promise<void>((r) => engine.listen(0, '127.0.0.1', r));
    let now = 0;
    try {
      const sync = new EngineWeightSync(
        new VllmEngineClient(`http://127.0.0.1:${(engine.address() as AddressInfo).port}`, 60_000),
        () => null,
        'rollout-0',
        10_000,
        undefined,
        { idleAfterMs: 3_000, now: () => now },
        { deadlineMs: 120_000, onStalled: (detail, how, forMs) => stalls.push(`${how} after ${forMs} ms: ${detail}`) },
      );
      stopped = true;
      await sync.tick(); // never answered since it started: starting, not stopped
      now = 200_000;
      await sync.tick();
      expect(stalls).toEqual([]);
      stopped = false;
      await sync.tick(); // it answers
      stopped = true;
      now = 210_000;
      await sync.tick(); // silent from here
      now = 329_000;
      await sync.tick();
      expect(stalls).toEqual([]);
      now = 331_000;
      await sync.tick();
      // Dated from the first unanswered look (210 s), not the report.
      expect(stalls).toEqual(['unresponsive after 121000 ms: the engine has not answered its agent for 121 s: stopped or wedged']);
      now = 500_000;
      await sync.tick();
      expect(stalls).toHaveLength(1); // once per engine start
    } finally {
      engine.closeAllConnections();
      await new Promise<void>((r) => engine.close(() => r()));
    }
  });

  it('a load that finishes within the deadline is no stall', async () => {
    const stalls: string[] = [];
    const fast = new FakeVllm();
    const fastUrl = await fast.start();
    fast.version = '3';
    try {
      const sync = new EngineWeightSync(
        new VllmEngineClient(fastUrl),
        () => ({ version: 4, parts: [{ path: '/dev/shm/v4', target: null, bucketStarts: [0], tensors: [] }] }),
        'rollout-0',
        10_000,
        undefined,
        undefined,
        {
          deadlineMs: 5_000,
          onStalled: (detail) => stalls.push(detail),
        },
      );
      await sync.tick();
      expect(sync.lastLoad?.version).toBe(4);
      expect(stalls).toEqual([]);
    } finally {
      await new Promise<void>((r) => fast.server.close(() => r()));
    }
  });
});
