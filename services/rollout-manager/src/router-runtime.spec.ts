import { InProcessBus } from '@robustrl/bus';
import { createMessage, decodeMessage, MessageOf, RobustrlMessage, Topics } from '@robustrl/contracts';
import { eventually } from '@robustrl/testing/eventually';
import { FakeInferenceEngine } from '@robustrl/testing/fake-inference-engine';
import { chat } from '@robustrl/testing/openai-client';
import { routerConfigFromEnv, RouterRuntime } from './router-runtime';

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
});
