import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { Test } from '@nestjs/testing';
import { InProcessBus } from '@robustrl/bus';
import { messagesOf } from '@robustrl/testing/bus-messages';
import { eventually } from '@robustrl/testing/eventually';
import { AgentApiController } from '../agent-api.controller';
import { agentConfigFromEnv } from '../agent-config';
import { AgentRuntime } from '../agent-runtime';

/**
 * An agent whose machine a stand-in Compute Engine metadata server preempts: the notice is on the bus as
 * the machine's `node-draining` signal while the machine still runs (the detector confirms that signal at
 * once as the machine's fault: detector.decider.spec.ts "explicit signals confirm at once").
 */
describe('an agent reads its cloud notices', () => {
  let preempted = false;
  let server: Server;
  let bus: InProcessBus;
  let runtime: AgentRuntime;

  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.headers['metadata-flavor'] !== 'Google') return void res.writeHead(403).end('missing Metadata-Flavor');
      res.writeHead(200, { 'content-type': 'application/text' }).end(preempted ? 'TRUE' : 'FALSE');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    bus = new InProcessBus();
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/computeMetadata/v1/instance/preempted`;
    runtime = new AgentRuntime(
      bus,
      agentConfigFromEnv({
        ROBUSTRL_JOB_ID: 'job-1',
        ROBUSTRL_MACHINE_ID: 'm-1',
        ROBUSTRL_ROLE: 'rollout',
        ROBUSTRL_GPU_SOURCE: 'emulated',
        ROBUSTRL_GPU_SAMPLE_SECONDS: '3600',
        ROBUSTRL_WEIGHTS_PORT: '0',
        ROBUSTRL_WEIGHTS_BIND_HOST: '127.0.0.1',
        ROBUSTRL_AGENT_NOTICES: `gce-preempted=${url}`,
        ROBUSTRL_AGENT_NOTICE_POLL_SECONDS: '0.1',
      }),
    );
    await runtime.start('http://127.0.0.1:1');
  });

  afterAll(async () => {
    await runtime.stop();
    await bus.close();
    await new Promise((resolve) => server.close(resolve));
  });

  const signals = () => messagesOf(bus, 'AgentFaultSignalled');

  it('nothing while the cloud says nothing; once preempted, one node-draining signal with its deadline, and only one', async () => {
    await new Promise((r) => setTimeout(r, 400));
    expect(signals()).toEqual([]);
    preempted = true;
    const signal = await eventually('node-draining reported', () => signals()[0]);
    expect(signal.data).toMatchObject({ machineId: 'm-1', role: 'rollout', signal: 'node-draining' });
    // Compute Engine gives 30 s: the time left as the agent reported it, a little less for the time since the read.
    const left = (signal.data as { departsInMs: number }).departsInMs;
    expect(left).toBeGreaterThan(25_000);
    expect(left).toBeLessThanOrEqual(30_000);
    expect((signal.data as { detail: string }).detail).toMatch(/^Compute Engine preemption: this machine goes by \S+ \(in 30 s\)$/);
    await new Promise((r) => setTimeout(r, 400));
    expect(signals()).toHaveLength(1);
  });
});

/** A trainer machine's agent whose trainer is a process that sleeps: what stops it is the agent. */
function trainerAgent(bus: InProcessBus, env: Record<string, string>): AgentRuntime {
  return new AgentRuntime(
    bus,
    agentConfigFromEnv({
      ROBUSTRL_MACHINE_ID: 't-0',
      ROBUSTRL_ROLE: 'trainer',
      ROBUSTRL_GPU_SOURCE: 'emulated',
      ROBUSTRL_GPU_SAMPLE_SECONDS: '3600',
      ROBUSTRL_TRAINER_COMMAND: 'exec sleep 60',
      ROBUSTRL_STOP_GRACE_SECONDS: '1',
      ROBUSTRL_WEIGHTS_PORT: '0',
      ROBUSTRL_WEIGHTS_BIND_HOST: '127.0.0.1',
      ...env,
    }),
  );
}

/**
 * A trainer machine that announced its departure stops its trainer at the next checkpoint: the step in
 * progress ends and is saved there, and the group that replaces it begins at the next step
 * (docs/planned-failures.md "A trainer moves at its checkpoint"). The stop is the agent's own: no fault.
 */
describe('a departing trainer stops at its checkpoint', () => {
  it('keeps training through checkpoints until the notice; after it, stops at the first one without reporting a fault', async () => {
    let preempted = false;
    const server = createServer((_req, res) => void res.writeHead(200).end(preempted ? 'TRUE' : 'FALSE'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const bus = new InProcessBus();
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/computeMetadata/v1/instance/preempted`;
    const runtime = trainerAgent(bus, { ROBUSTRL_JOB_ID: 'job-2', ROBUSTRL_AGENT_NOTICES: `gce-preempted=${url}`, ROBUSTRL_AGENT_NOTICE_POLL_SECONDS: '0.1' });
    const running = () => runtime.status().roleProcess!.running;
    try {
      await runtime.start('http://127.0.0.1:1');
      await eventually('the trainer running', () => running() || undefined);
      await runtime.checkpointSaved({ step: 4, uri: 'file:///ckpt/4', blockingMs: 5 });
      await new Promise((r) => setTimeout(r, 300));
      expect(running()).toBe(true);

      preempted = true;
      await eventually('node-draining reported', () => messagesOf(bus, 'AgentFaultSignalled')[0]);
      await runtime.checkpointSaved({ step: 5, uri: 'file:///ckpt/5', blockingMs: 5 });
      await eventually('the trainer stopped', () => !running() || undefined);
      expect(messagesOf(bus, 'CheckpointSaved').map((m) => m.data.step)).toEqual([4, 5]);
      await new Promise((r) => setTimeout(r, 300));
      expect(messagesOf(bus, 'AgentFaultSignalled').map((m) => m.data.signal)).toEqual(['node-draining']);
    } finally {
      await runtime.stop();
      await bus.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('a departure the framework reports through the API', () => {
  it('stops the trainer at its next checkpoint too (POST /v1/errors with node-draining)', async () => {
    const bus = new InProcessBus();
    const runtime = trainerAgent(bus, { ROBUSTRL_JOB_ID: 'job-3' });
    const moduleRef = await Test.createTestingModule({
      controllers: [AgentApiController],
      providers: [{ provide: AgentRuntime, useValue: runtime }],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    const post = (path: string, body: object) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const running = () => runtime.status().roleProcess!.running;
    try {
      await runtime.start(url);
      await eventually('the trainer running', () => running() || undefined);
      // Another fault is not a departure: the trainer goes on through its checkpoint.
      expect((await post('/v1/errors', { signal: 'step-exception', detail: 'a bad batch' })).status).toBe(202);
      expect((await post('/v1/checkpoints', { step: 1, uri: 'file:///ckpt/1', blockingMs: 5 })).status).toBe(202);
      await new Promise((r) => setTimeout(r, 300));
      expect(running()).toBe(true);
      expect((await post('/v1/errors', { signal: 'node-draining', detail: 'Ray drain', departsInSeconds: 60 })).status).toBe(202);
      expect((await post('/v1/checkpoints', { step: 2, uri: 'file:///ckpt/2', blockingMs: 5 })).status).toBe(202);
      await eventually('the trainer stopped', () => !running() || undefined);
    } finally {
      await runtime.stop();
      await app.close();
      await bus.close();
    }
  });
});
