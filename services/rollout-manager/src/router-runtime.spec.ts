import { InProcessBus } from '@robustrl/bus';
import { createMessage, decodeMessage, MessageOf, RobustrlMessage, Topics } from '@robustrl/contracts';
import { eventually } from '@robustrl/testing/eventually';
import { FakeInferenceEngine } from '@robustrl/testing/fake-inference-engine';
import { chat, ChatAnswer, streamChat } from '@robustrl/testing/openai-client';
import { RolloutPoolDecider, RolloutPoolInput, RolloutPoolState } from '@robustrl/rollout-manager-domain';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { routerConfigFromEnv } from './router-config';
import { RouterRuntime } from './router-runtime';

describe('router runtime in the rollout manager', () => {
  let engines: FakeInferenceEngine[];
  let bus: InProcessBus;
  let runtime: RouterRuntime;
  let url: string;

  beforeEach(async () => {
    engines = await Promise.all(['e1', 'e2'].map((id) => FakeInferenceEngine.start({ id, toolRounds: 1, tokensPerReply: 8, tokenIntervalMs: 1 })));
    bus = new InProcessBus();
    runtime = new RouterRuntime(bus, {
      jobId: 'job-r',
      port: 0,
      host: '127.0.0.1',
      requestManagerUrl: null,
      throughputSeconds: 0.2,
      maxStaleness: 1,
      continuationPolicy: 'keep',
      engines: [
        { id: 'e1', machineId: 'rollout-1', baseUrl: engines[0].url },
        { id: 'e2', machineId: 'rollout-2', baseUrl: engines[1].url },
      ],
    });
    url = await runtime.start();
  });

  afterEach(async () => {
    await runtime.stop();
    for (const e of engines) e.kill();
    await bus.close();
  });

  const samples = () =>
    bus
      .read(Topics.telemetry)
      .map((r) => decodeMessage(r.value))
      .filter((d): d is { ok: true; message: RobustrlMessage } => d.ok)
      .map((d) => d.message as MessageOf<'RolloutThroughputSampled'>);
  const headers = { 'x-robustrl-job': 'job-r', 'x-robustrl-prompt': 'p', 'x-robustrl-sample': '0' };

  it("publishes each engine's throughput for the detector, counting a trajectory parked on a tool as waiting, not stalled", async () => {
    const answer = await chat(url, { model: 'm', messages: [{ role: 'user', content: 'go' }] }, headers);
    expect(answer.message.tool_calls).toHaveLength(1);
    const engine = answer.engineId!;
    const machine = engine === 'e1' ? 'rollout-1' : 'rollout-2';
    const generated = await eventually('a sample with the answer', () => samples().find((s) => s.data.rolloutId === engine && s.data.completedRequests === 1));
    expect(generated.data.machineId).toBe(machine);
    expect(generated.jobId).toBe('job-r');
    expect(generated.data.tokensPerSecond).toBeGreaterThan(0);
    expect(generated.data.awaitingTools).toBe(1);
    // Next window: no output, but the trajectory still waits on its tool — zero throughput that is healthy.
    const quiet = await eventually('an idle sample', () =>
      samples().find((s) => s.data.rolloutId === engine && s.data.completedRequests === 0 && Date.parse(s.occurredAt) > Date.parse(generated.occurredAt)),
    );
    expect(quiet.data).toMatchObject({ tokensPerSecond: 0, awaitingTools: 1, inFlightRequests: 1 });
  });

  it('drops the engines of a machine confirmed faulty, and keeps trajectories where the pool reassigned them', async () => {
    const fault = createMessage(
      'FaultConfirmed',
      {
        verdictId: 'v',
        machineId: 'rollout-1',
        role: 'rollout',
        rule: 'rollout-silent',
        handledAs: 'rollout',
        machineFaulty: true,
        detectionLatencyMs: 1,
        evidence: {},
      },
      { jobId: 'job-r', source: 'spec', occurredAt: new Date().toISOString() },
    );
    const reassigned = createMessage(
      'TrajectoriesReassigned',
      {
        fromRolloutId: 'e1',
        reason: 'rollout-1 confirmed faulty',
        assignments: [{ trajectoryId: 'job-r/p/0', toRolloutId: 'e2', resumeFromTurn: 2 }],
      },
      { jobId: 'job-r', source: 'rollout-manager', occurredAt: new Date().toISOString() },
    );
    runtime.follow(fault, [reassigned]);
    expect(runtime.pool.snapshot().map((e) => e.id)).toEqual(['e2']);
    expect(runtime.pool.stickyEngineOf('job-r/p/0')).toBe('e2');
    const answer = await chat(url, { model: 'm', messages: [{ role: 'user', content: 'go' }] }, headers);
    expect(answer.engineId).toBe('e2');
  });

  it('reads its engines from the environment and says what is wrong with a bad entry', () => {
    expect(routerConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_ROUTER: 'on' })).toMatchObject({ engines: [], maxStaleness: 1, continuationPolicy: 'keep' });
    expect(routerConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_ROUTER: 'on', ROBUSTRL_CONTINUATION_POLICY: 'restart-from-prompt' })).toMatchObject({
      continuationPolicy: 'restart-from-prompt',
    });
    expect(() => routerConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_ROUTER: 'on', ROBUSTRL_CONTINUATION_POLICY: 'drop' })).toThrow(
      /ROBUSTRL_CONTINUATION_POLICY must be keep or restart-from-prompt, got 'drop'/,
    );
    expect(routerConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_ROUTER: 'on', ROBUSTRL_MAX_STALENESS: '0' })).toMatchObject({ maxStaleness: 0 });
    expect(() => routerConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_ROUTER: 'on', ROBUSTRL_MAX_STALENESS: '-1' })).toThrow(/ROBUSTRL_MAX_STALENESS/);
    expect(() => routerConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_ROUTER: 'yes' })).toThrow(/ROBUSTRL_ROUTER must be on or off/);
    expect(routerConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_ROUTER: 'off', ROBUSTRL_ROUTER_ENGINES: 'a=http://x' })).toBeNull();
    expect(routerConfigFromEnv({})).toBeNull();
    expect(routerConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_ROUTER_ENGINES: 'a=http://10.0.0.1:8000, b@node-7=http://10.0.0.2:8000' })).toMatchObject({
      port: 8000,
      engines: [
        { id: 'a', machineId: 'a', baseUrl: 'http://10.0.0.1:8000' },
        { id: 'b', machineId: 'node-7', baseUrl: 'http://10.0.0.2:8000' },
      ],
    });
    expect(() => routerConfigFromEnv({ ROBUSTRL_JOB_ID: 'j', ROBUSTRL_ROUTER_ENGINES: 'a:8000' })).toThrow(/'a:8000' is not id=url/);
    expect(() => routerConfigFromEnv({ ROBUSTRL_ROUTER_ENGINES: 'a=http://x' })).toThrow(/ROBUSTRL_JOB_ID/);
  });

  it('listens on loopback by default; anywhere else only with the loop API keys it asks for', () => {
    const on = { ROBUSTRL_JOB_ID: 'j', ROBUSTRL_ROUTER: 'on' };
    expect(routerConfigFromEnv(on)).toMatchObject({ host: '127.0.0.1', auth: { kind: 'open', why: 'loopback' } });
    expect(() => routerConfigFromEnv({ ...on, ROBUSTRL_ROUTER_HOST: '0.0.0.0' })).toThrow(/without a token: set ROBUSTRL_ROUTER_TOKENS/);
    // A service's own HTTP address is the router's default too: in a container both are reached from outside.
    expect(() => routerConfigFromEnv({ ...on, ROBUSTRL_HTTP_HOST: '0.0.0.0' })).toThrow(/ROBUSTRL_ROUTER_TOKENS/);
    expect(
      routerConfigFromEnv({
        ...on,
        ROBUSTRL_ROUTER_HOST: '0.0.0.0',
        ROBUSTRL_ROUTER_TOKENS: 'loop-api-key-0123456789',
        ROBUSTRL_REQUEST_MANAGER_URL: 'http://rm:8083',
        ROBUSTRL_REQUEST_MANAGER_TOKEN: 'store-token-0123456789',
      }),
    ).toMatchObject({ host: '0.0.0.0', auth: { kind: 'bearer' }, requestManagerToken: 'store-token-0123456789' });
  });
});

/**
 * Router membership follows the rollout pool. On main the engine list was static: a
 * replacement rollout's engine never joined, a fresh one would have served before it held weights,
 * and every turn was tagged weight version 0.
 */
describe('router membership follows the rollout pool', () => {
  const job = 'job-m';
  let engines: FakeInferenceEngine[];
  let bus: InProcessBus;
  let runtime: RouterRuntime;
  let url: string;
  let state: RolloutPoolState;
  let requestManager: Server;
  let recorded: Array<{ weightVersion: number; kind: string }>;

  const at = () => ({ jobId: job, source: 'spec', occurredAt: new Date().toISOString() });
  /** Fold into the pool as the rollout manager does, then let the router follow. */
  const apply = (input: RolloutPoolInput) => {
    state = RolloutPoolDecider.evolve(state, input);
    runtime.follow(input, []);
  };
  const register = (machineId: string, engine: FakeInferenceEngine) =>
    createMessage(
      'MachineRegistered',
      {
        machineId,
        role: 'rollout',
        zone: 'az-1',
        hardwareClass: 'h100x8',
        gpus: 8,
        agentAddress: `http://${machineId}:8086`,
        dpRank: 0,
        weightsAddress: `${machineId}:13337`,
        inferenceUrl: engine.url,
      },
      at(),
    );
  const published = (version: number) => createMessage('WeightVersionPublished', { version, step: version, buckets: [], totalBytes: 0, sources: [] }, at());
  const rolloutFault = (verdictId: string, machineId: string) =>
    createMessage(
      'FaultConfirmed',
      { verdictId, machineId, role: 'rollout', rule: 'rollout-silent', handledAs: 'rollout', machineFaulty: true, detectionLatencyMs: 1, evidence: {} },
      at(),
    );
  const relay = (machineId: string, version: number) => createMessage('RelayJoined', { instanceId: machineId, version, address: `${machineId}:13337` }, at());
  const routed = () =>
    runtime.pool
      .snapshot()
      .map((e) => `${e.id}@v${e.weightVersion}`)
      .sort();
  const headers = (prompt: string) => ({ 'x-robustrl-job': job, 'x-robustrl-prompt': prompt, 'x-robustrl-sample': '0' });
  /** m1 and m2 registered, version 1 published, both holding it. */
  const bothServingVersion1 = () => {
    apply(register('m1', engines[0]));
    apply(register('m2', engines[1]));
    apply(published(1));
    apply(relay('m1', 1));
    apply(relay('m2', 1));
  };

  beforeEach(async () => {
    engines = await Promise.all(['m1', 'm2'].map((id) => FakeInferenceEngine.start({ id, toolRounds: 0, tokensPerReply: 4, tokenIntervalMs: 1 })));
    recorded = [];
    requestManager = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const parsed = body ? (JSON.parse(body) as { turns?: Array<{ weightVersion: number; kind: string }> }) : {};
        for (const t of parsed.turns ?? []) recorded.push(t);
        // Enough of the request manager for the router's recorder: nothing stored before (the prefix is 404).
        res.writeHead(req.method === 'GET' ? 404 : 200, { 'content-type': 'application/json' }).end('{"turns":[]}');
      });
    });
    await new Promise<void>((r) => requestManager.listen(0, '127.0.0.1', r));
    bus = new InProcessBus();
    state = RolloutPoolDecider.initialState();
    runtime = new RouterRuntime(
      bus,
      {
        jobId: job,
        port: 0,
        host: '127.0.0.1',
        requestManagerUrl: `http://127.0.0.1:${(requestManager.address() as AddressInfo).port}`,
        throughputSeconds: 60,
        maxStaleness: 1,
        continuationPolicy: 'keep',
        engines: [],
      },
      () => state,
    );
    url = await runtime.start();
  });

  afterEach(async () => {
    await runtime.stop();
    for (const e of engines) e.kill();
    await bus.close();
    await new Promise((r) => requestManager.close(r));
  });

  it('a registered engine routes before the first version is published, tagging turns with the initial weights', async () => {
    apply(register('m1', engines[0]));
    expect(routed()).toEqual(['m1@v0']);
    const answer = await chat(url, { model: 'm', messages: [{ role: 'user', content: 'go' }] }, headers('a'));
    expect(answer.engineId).toBe('m1');
    await eventually('the turn recorded', () => (recorded.some((t) => t.kind === 'model-output') ? true : undefined));
    expect(recorded.filter((t) => t.kind === 'model-output').map((t) => t.weightVersion)).toEqual([0]);
  });

  it('a replacement joins only once it holds the published version, and turns carry the version its engine held', async () => {
    apply(register('m1', engines[0]));
    apply(published(3));
    expect(routed()).toEqual([]); // m1 holds nothing of version 3 yet: STALE
    apply(relay('m1', 3));
    expect(routed()).toEqual(['m1@v3']);
    // m2 joins the job as m1's replacement would: registered, but no weights pulled yet.
    apply(register('m2', engines[1]));
    expect(routed()).toEqual(['m1@v3']);
    const first = await chat(url, { model: 'm', messages: [{ role: 'user', content: 'go' }] }, headers('b'));
    expect(first.engineId).toBe('m1');
    apply(relay('m2', 3));
    expect(routed()).toEqual(['m1@v3', 'm2@v3']);
    await eventually('the turn recorded', () => (recorded.some((t) => t.kind === 'model-output') ? true : undefined));
    expect(recorded.filter((t) => t.kind === 'model-output').map((t) => t.weightVersion)).toEqual([3]);
  });

  it('an engine more than the bound behind leaves until it catches up; within the bound it stays with its version', () => {
    bothServingVersion1();
    apply(published(2));
    expect(routed()).toEqual(['m1@v1', 'm2@v1']); // one behind: within the bound of 1
    apply(relay('m1', 2));
    apply(published(3));
    expect(routed()).toEqual(['m1@v2']); // m2 is two behind
    apply(relay('m2', 3));
    expect(routed()).toEqual(['m1@v2', 'm2@v3']);
  });

  it('leaves when its machine is confirmed faulty or lent, and a machine registering again after a fault starts STALE', () => {
    bothServingVersion1();
    apply(rolloutFault('v1', 'm1'));
    expect(routed()).toEqual(['m2@v1']);
    apply(createMessage('PromoteRolloutToTrainer', { recoveryId: 'r', commandId: 'r/1', rolloutMachineId: 'm2', replacesMachineId: 't0' }, at()));
    expect(routed()).toEqual([]);
    apply(register('m1', engines[0]));
    expect(routed()).toEqual([]);
    apply(relay('m1', 1));
    expect(routed()).toEqual(['m1@v1']);
  });

  it('a machine leaving on a notice keeps the stream it serves to its end, takes no new request, and leaves when it holds none', async () => {
    // Long enough (1.2 s) that the notice, given after two chunks, always finds the stream still on the engine.
    const slow = await FakeInferenceEngine.start({ id: 'm3', toolRounds: 0, tokensPerReply: 120, tokenIntervalMs: 10 });
    try {
      apply(register('m3', slow));
      apply(published(1));
      apply(relay('m3', 1));
      let second: Promise<ChatAnswer> | undefined;
      const body = { model: 'm', stream: true, messages: [{ role: 'user', content: 'a long one' }] };
      const first = await streamChat(url, body, headers('d1'), {
        afterChunks: 2,
        then: () => {
          // m2 joins, then m3's machine gives notice while its stream runs.
          apply(register('m2', engines[1]));
          apply(relay('m2', 1));
          apply(
            createMessage(
              'FaultConfirmed',
              {
                verdictId: 'notice',
                machineId: 'm3',
                role: 'rollout',
                rule: 'explicit-signal',
                handledAs: 'rollout',
                machineFaulty: false,
                detectionLatencyMs: 0,
                evidence: { signal: 'node-draining', departsAt: new Date(Date.now() + 30_000).toISOString() },
              },
              at(),
            ),
          );
          expect(runtime.pool.get('m3')).toMatchObject({ leavesAt: expect.any(Number), inFlight: 1 });
          second = chat(url, { model: 'm', messages: [{ role: 'user', content: 'a new one' }] }, headers('d2'));
        },
      });
      expect(first).toMatchObject({ engineId: 'm3', done: true, finishReason: 'stop' });
      expect(first.text.trim().split(' ')).toHaveLength(120);
      expect((await second!).engineId).toBe('m2');
      // One generation each: the stream was never cut and continued on m2.
      expect([slow.generationRequests, engines[1].generationRequests]).toEqual([1, 1]);
      expect(routed()).toEqual(['m2@v1']);
    } finally {
      slow.kill();
    }
  });

  it('a machine hosting several engines routes each by its own id; they leave with their machine, and one it stops listing leaves', async () => {
    const several = (machineId: string, listed: FakeInferenceEngine[]) => {
      const m = register(machineId, listed[0]);
      const { inferenceUrl: _one, ...data } = m.data;
      return { ...m, data: { ...data, engines: listed.map((e, i) => ({ engineId: `${machineId}/e${i}`, url: e.url })) } } as typeof m;
    };
    apply(several('m1', engines));
    apply(published(1));
    apply(relay('m1', 1));
    expect(routed()).toEqual(['m1/e0@v1', 'm1/e1@v1']);
    const served = new Set<string>();
    for (const prompt of ['p1', 'p2', 'p3', 'p4', 'p5', 'p6'])
      served.add(String((await chat(url, { model: 'm', messages: [{ role: 'user', content: prompt }] }, headers(prompt))).engineId));
    // Both engines take work, each under its own id.
    expect([...served].sort()).toEqual(['m1/e0', 'm1/e1']);
    // Registered again (its engines restarted) listing one: the other leaves; the one listed starts STALE again.
    apply(several('m1', [engines[0]]));
    apply(relay('m1', 1));
    expect(routed()).toEqual(['m1/e0@v1']);
    apply(rolloutFault('v2', 'm1'));
    expect(routed()).toEqual([]);
  });

  it('a router that starts after the pool was refolded routes the engines registered before', async () => {
    await runtime.stop();
    apply(register('m1', engines[0]));
    apply(published(2));
    apply(relay('m1', 2));
    runtime = new RouterRuntime(bus, { ...runtime.config, engines: [] }, () => state);
    await runtime.start();
    expect(routed()).toEqual(['m1@v2']);
  });
});
